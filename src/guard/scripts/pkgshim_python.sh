# cbrun package-manager shim: the Python tools (pip, uv, pipx, poetry, pdm).
# Spliced into pkgshim.sh before its main part (see src/guard/pkgshim/).

_cb_py() {
	_cb_trim "$1"
	_cbp_s=$_cb_t
	[ -n "$_cbp_s" ] || return 0
	case $_cbp_s in *'#egg='*)
		_cbp_g=${_cbp_s#*'#egg='}
		_cbp_g=${_cbp_g%%[\&[:space:]]*}
		_cb_check_name py "$_cbp_g"
		;;
	esac
	_cbp_n=${_cbp_s%%[!A-Za-z0-9._-]*}
	if [ -n "$_cbp_n" ]; then
		# PEP 508 direct reference: name [extras] @ url
		_cbp_r=${_cbp_s#"$_cbp_n"}
		_cbp_r=${_cbp_r#"${_cbp_r%%[![:space:]]*}"}
		case $_cbp_r in '['*']'*)
			_cbp_r=${_cbp_r#*]}
			_cbp_r=${_cbp_r#"${_cbp_r%%[![:space:]]*}"}
			;;
		esac
		case $_cbp_r in @*)
			_cb_check_name py "$_cbp_n"
			return 0
			;;
		esac
	fi
	_cbp_w=${_cbp_s%%[\;[:space:]]*}
	case $_cbp_w in
	*://* | git+* | hg+* | svn+* | bzr+* | file:* | .* | /* | '~'* | */* | \
		*.tar.gz | *.tar.bz2 | *.tar.xz | *.tar.zst | *.tgz | *.tbz2 | *.tbz | *.txz | \
		*.tar | *.whl | *.zip | *.egg | *.conda | *.deb | *.crate)
		_cb_loc py "$_cbp_s"
		;;
	*) _cb_check_name py "$_cbp_n" ;;
	esac
}

# Dependency specs of a pyproject.toml: PEP 621 dependencies and extras,
# dependency groups, build requirements, uv, pdm and poetry tables.
_cb_pyproject() {
	[ -f "$1" ] && [ -r "$1" ] || return 0
	_cb_need_awk "$1"
	_cbf_list=$(awk '
function scan(line,   i, n, c) {
	n = length(line)
	for (i = 1; i <= n; i++) {
		c = substr(line, i, 1)
		if (q != "") {
			if (c == "\\" && q == "\"") { i++; buf = buf substr(line, i, 1); continue }
			if (c == q) { if (depth > 0) print buf; q = ""; buf = ""; continue }
			buf = buf c
			continue
		}
		if (c == "#") break
		if (c == "\"" || c == "\047") { q = c; buf = ""; continue }
		if (c == "[") depth++
		else if (c == "]") { depth--; if (depth <= 0) { depth = 0; arr = 0; return } }
	}
}
arr { scan($0); next }
/^[ \t]*\[/ {
	h = $0; sub(/^[ \t]*\[+[ \t]*/, "", h); sub(/[ \t]*\].*$/, "", h); gsub(/[ \t"\047]/, "", h)
	tbl = h; next
}
/^[ \t]*["\047]?[A-Za-z0-9_.-]+["\047]?[ \t]*=/ {
	k = $0; sub(/[ \t]*=.*/, "", k); gsub(/[ \t"\047]/, "", k)
	v = $0; sub(/^[^=]*=[ \t]*/, "", v)
	if (tbl ~ /^tool\.poetry(\.group\.[^.]+)?\.(dev-)?dependencies$/) { if (k != "python") print k; next }
	want = 0
	if (tbl == "project" && k == "dependencies") want = 1
	else if (tbl == "project.optional-dependencies" || tbl == "dependency-groups") want = 1
	else if (tbl == "build-system" && k == "requires") want = 1
	else if (tbl == "tool.uv" && (k == "dev-dependencies" || k == "constraint-dependencies" || k == "override-dependencies")) want = 1
	else if (tbl == "tool.pdm.dev-dependencies") want = 1
	if (want && v ~ /^\[/) { arr = 1; depth = 0; q = ""; scan(v) }
}
' "$1") || _cb_refuse "cannot read $1"
	_cb_speclist py "$_cbf_list"
}

# pip requirements file: one requirement or option line each; `\` joins
# lines; `#` after whitespace starts a comment.
_cb_reqfile() {
	_cb_vl='--requirement --constraint --editable --index-url --extra-index-url --find-links --no-binary --only-binary --trusted-host --use-feature --global-option --config-settings --hash'
	_cb_vs=rceif
	_cb_style=gnu
	_cb_fileopts='-r --requirement -c --constraint'
	_cb_editopts='-e --editable'
	_cb_skip='--index-url -i --extra-index-url --find-links -f --trusted-host --use-feature --global-option --config-settings --hash'
	_cb_abbrev=1
	_cb_flags=--pre
	_cb_pos_fn=_cb_py_arg
	_cb_opt_fn=_cb_py_opt
	_cb_flag_fn=:
	_cb_projopts=
	_cbr_acc=
	while IFS= read -r _cbr_line || [ -n "$_cbr_line" ]; do
		case $_cbr_line in *\\)
			_cbr_acc="$_cbr_acc${_cbr_line%\\}"
			continue
			;;
		esac
		_cbr_line="$_cbr_acc$_cbr_line"
		_cbr_acc=
		case $_cbr_line in '#'*) continue ;; esac
		_cbr_line=${_cbr_line%%[[:space:]]#*}
		_cb_sub=reqfile
		# shellcheck disable=SC2086 # split the line into words, globbing is off
		_cb_walk $_cbr_line
	done <"$1"
	if [ -n "$_cbr_acc" ]; then
		_cb_sub=reqfile
		# shellcheck disable=SC2086
		_cb_walk $_cbr_acc
	fi
}

_cb_py_arg() {
	_cb_spec py "$1"
	if [ -d "$1" ]; then _cb_pyproject "$1/pyproject.toml"; fi
}

# Options of the Python tools: requirement files, editables, skipped values
# (indexes, paths, versions), everything else checked as a spec.
_cb_py_opt() {
	_cb_in "$1" "$_cb_projopts" && _cb_projdir=$2
	case $_cb_sub in '' | -) return 0 ;; esac
	if _cb_in "$1" "$_cb_fileopts"; then
		_cb_enqueue py "$2" "$_cb_base"
		return 0
	fi
	if [ -n "$_cb_abbrev" ]; then
		# pip (optparse) accepts unambiguous prefixes of long options.
		# shellcheck disable=SC2194 # the pattern is the variable part
		case $1 in --?*)
			case --requirement in "$1"*) if [ ${#1} -ge 5 ]; then
				_cb_enqueue py "$2" "$_cb_base"
				return 0
			fi ;;
			esac
			case --constraint in "$1"*) if [ ${#1} -ge 6 ]; then
				_cb_enqueue py "$2" "$_cb_base"
				return 0
			fi ;;
			esac
			;;
		esac
	fi
	if _cb_in "$1" "$_cb_editopts"; then
		_cb_py_arg "$2"
		return 0
	fi
	_cb_in "$1" "$_cb_skip" && return 0
	_cb_spec py "$2"
}

_cb_pip_pos() {
	case $_cb_sub in
	'') _cb_find_sub "$1" ;;
	-) ;;
	*) _cb_py_arg "$1" ;;
	esac
}

_cb_t_pip() {
	_cb_vl='--python --log --log-file --local-log --proxy --retries --timeout --exists-action --trusted-host --cert --client-cert --cache-dir --use-feature --use-deprecated --keyring-provider --resume-retries --requirement --constraint --editable --target --platform --python-version --implementation --abi --root --prefix --src --upgrade-strategy --install-option --global-option --config-settings --config-setting --no-binary --only-binary --progress-bar --root-user-action --report --index-url --extra-index-url --find-links --dest --wheel-dir --build-dir --group --build-constraint --hash --format --path --output'
	_cb_vs=rceitfdwCb
	_cb_fileopts='-r --requirement -c --constraint --build-constraint'
	_cb_editopts='-e --editable'
	_cb_skip='--python --log --log-file --local-log --proxy --retries --timeout --exists-action --trusted-host --cert --client-cert --cache-dir --use-feature --use-deprecated --keyring-provider --resume-retries --target -t --platform --python-version --implementation --abi --root --prefix --src --upgrade-strategy --install-option --global-option --config-settings --config-setting -C --progress-bar --root-user-action --report --index-url -i --extra-index-url --find-links -f --dest -d --wheel-dir -w --build-dir -b --hash --format --path --output --group'
	_cb_abbrev=1
	_cb_flags='--pre --upgrade'
	_cb_subs_check='install download wheel lock'
	_cb_subs_pass='uninstall freeze inspect list show check config search cache index hash completion debug help'
	_cb_pos_fn=_cb_pip_pos
	_cb_opt_fn=_cb_py_opt
	_cb_walk "$@"
	case $_cb_sub in '' | -) return 0 ;; esac
	# pip also takes options from the environment.
	for _cbx in ${PIP_REQUIREMENT-} ${PIP_CONSTRAINT-}; do _cb_enqueue py "$_cbx" .; done
	for _cbx in ${PIP_EDITABLE-}; do _cb_py_arg "$_cbx"; done
	_cb_run_queue
}

_cb_uv_pos() {
	case $_cb_sub in
	'') _cb_find_sub "$1" ;;
	pip)
		case $1 in
		install) _cb_sub=pip-install ;;
		sync) _cb_sub=pip-sync ;;
		*) _cb_sub=- _cb_stop=1 ;;
		esac
		;;
	tool)
		case $1 in
		install) _cb_sub=tool-install ;;
		run) _cb_sub=tool-run ;;
		*) _cb_sub=- _cb_stop=1 ;;
		esac
		;;
	pip-install | add | tool-install) _cb_py_arg "$1" ;;
	pip-sync) _cb_enqueue py "$1" . ;;
	tool-run)
		_cb_spec py "$1"
		_cb_stop=1
		;;
	run) _cb_stop=1 ;;
	esac
}

_cb_t_uv() {
	_cb_vl='--python -p --python-preference --cache-dir --config-file --directory --project --color --allow-insecure-host --index --default-index --index-url -i --extra-index-url -f --find-links --index-strategy --keyring-provider --resolution --prerelease --exclude-newer --link-mode --python-platform --python-version --target -t --prefix --config-setting -C --env-file --marker -m --extra --group --only-group --no-group --optional --package --rev --tag --branch --bounds --script --torch-backend --output-file -o --format --fork-strategy --requirement --requirements -r --constraint --constraints -c --override --overrides --build-constraint --build-constraints -b --with-requirements --editable -e --with-editable --with --from --reinstall-package --upgrade-package -P --no-build-package --no-binary-package --only-binary --no-binary --refresh-package --exclude --python-downloads --upgrade-group'
	_cb_vs=pifCtmocrbeP
	_cb_fileopts='-r --requirement --requirements -c --constraint --constraints --override --overrides --build-constraint --build-constraints -b --with-requirements'
	_cb_editopts='-e --editable --with-editable'
	_cb_skip='--python -p --python-preference --cache-dir --config-file --directory --project --color --allow-insecure-host --index --default-index --index-url -i --extra-index-url -f --find-links --index-strategy --keyring-provider --resolution --prerelease --exclude-newer --link-mode --python-platform --python-version --target -t --prefix --config-setting -C --env-file --marker -m --extra --group --only-group --no-group --optional --package --rev --tag --branch --bounds --script --torch-backend --output-file -o --format --fork-strategy --python-downloads --upgrade-group --exclude'
	_cb_projopts='--project --directory'
	_cb_subs_check='pip add tool run sync'
	_cb_subs_pass='lock export tree venv python cache self version help init remove build publish generate-shell-completion format auth'
	_cb_pos_fn=_cb_uv_pos
	_cb_opt_fn=_cb_py_opt
	[ "$_cb_tool" = uvx ] && _cb_sub=tool-run
	_cb_walk "$@"
	case $_cb_sub in '' | - | pip | tool) return 0 ;; esac
	for _cbx in ${UV_CONSTRAINT-} ${UV_OVERRIDE-} ${UV_BUILD_CONSTRAINT-}; do _cb_enqueue py "$_cbx" .; done
	case $_cb_sub in add | run | sync) _cb_pyproject "${_cb_projdir:-.}/pyproject.toml" ;; esac
	_cb_run_queue
}

_cb_pipx_pos() {
	case $_cb_sub in
	'') _cb_find_sub "$1" ;;
	install | inject) _cb_py_arg "$1" ;;
	run)
		_cb_spec py "$1"
		_cb_stop=1
		;;
	esac
}

_cb_t_pipx() {
	_cb_vl='--spec --python --pip-args --index-url --suffix --preinstall -r --requirement --backend --global-option'
	_cb_vs=r
	_cb_fileopts='-r --requirement'
	_cb_editopts=
	_cb_skip='--python --pip-args --index-url --suffix --backend'
	_cb_subs_check='install inject run'
	_cb_subs_pass='upgrade upgrade-all upgrade-shared uninstall uninstall-all reinstall reinstall-all list interpreter pin unpin runpip ensurepath environment completion install-all uninject help'
	_cb_pos_fn=_cb_pipx_pos
	_cb_opt_fn=_cb_py_opt
	_cb_walk "$@"
	_cb_run_queue
}

_cb_poetry_pos() {
	case $_cb_sub in
	'') _cb_find_sub "$1" ;;
	self)
		case $1 in add | install) _cb_sub=self-add ;; *) _cb_sub=- _cb_stop=1 ;; esac
		;;
	add | self-add | update) _cb_py_arg "$1" ;;
	esac
}

_cb_t_poetry() {
	_cb_vl='--group -G --source --extras -E --python --platform --directory -C --project -P --only --with --without --markers --optional'
	_cb_projopts='--directory -C --project -P'
	_cb_vs=GECP
	_cb_fileopts=
	_cb_editopts=
	_cb_skip='--group -G --source --extras -E --python --platform --directory -C --project -P --only --with --without --markers --optional'
	_cb_subs_check='add install sync update self'
	_cb_subs_pass='remove lock build publish check show search new init run shell env config cache source export list about version help debug'
	_cb_pos_fn=_cb_poetry_pos
	_cb_opt_fn=_cb_py_opt
	_cb_walk "$@"
	case $_cb_sub in add | install | sync | update) _cb_pyproject "${_cb_projdir:-.}/pyproject.toml" ;; esac
}

_cb_pdm_pos() {
	case $_cb_sub in
	'') _cb_find_sub "$1" ;;
	add | update) _cb_py_arg "$1" ;;
	esac
}

_cb_t_pdm() {
	_cb_vl='-G --group -p --project -L --lockfile --venv --python --strategy -S --update-strategy'
	_cb_vs=GpLS
	_cb_fileopts=
	_cb_editopts='-e --editable'
	_cb_skip='-G --group -p --project -L --lockfile --venv --python --strategy -S --update-strategy'
	_cb_subs_check='add install sync update'
	_cb_subs_pass='remove lock list show build publish init run config cache info search use venv self export import fix outdated completion help'
	_cb_pos_fn=_cb_pdm_pos
	_cb_opt_fn=_cb_py_opt
	_cb_projopts='-p --project'
	_cb_walk "$@"
	case $_cb_sub in add | install | sync | update) _cb_pyproject "${_cb_projdir:-.}/pyproject.toml" ;; esac
}
