#!/bin/sh
# cbrun package-manager shim (generated; see src/guard/pkgshim.rs).
# Refuses installs of names on the case's denylist, then runs the real tool
# with its arguments untouched. Bans are stored as sha256 hashes of their
# normalised names. A tripwire, not a wall: the sandbox's network policy is
# what actually keeps packages out.

# Nothing the caller exported may change how this script runs.
unset -f printf sha256sum sed awk tr command read cd echo test '[' 2>/dev/null
_cb_path_set=${PATH+x}
_cb_path=${PATH-}
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
IFS=' 	
'
set -f
_cb_nl='
'
_cb_uc=ABCDEFGHIJKLMNOPQRSTUVWXYZ
_cb_lc=abcdefghijklmnopqrstuvwxyz

# Hashed ban keys per naming family, space-delimited.
@@CBRUN_HASHES@@

# Which tool this is: by invoked path, then by name, then this file's own.
_cb_select() {
@@CBRUN_SELECT@@
}

_cb_block() {
	printf '[cbrun denylist] blocked install of %s\n' "$1" >&2
	exit 1
}

_cb_refuse() {
	printf '[cbrun denylist] %s; refusing install\n' "$1" >&2
	exit 1
}

_cb_run() {
	if [ -n "$_cb_path_set" ]; then PATH=$_cb_path; export PATH; else unset PATH; fi
	if [ -n "$_cb_goroot" ] && [ -z "${GOROOT-}" ]; then
		GOROOT=$_cb_goroot
		export GOROOT
	fi
	set +f
	exec "$_cb_real" "$@"
}

# ------------------------------------------------------------ names

_cb_trim() {
	_cb_t=$1
	_cb_t=${_cb_t#"${_cb_t%%[![:space:]]*}"}
	_cb_t=${_cb_t%"${_cb_t##*[![:space:]]}"}
}

_cb_norm() {
	case $1 in
	py | conda) printf '%s\n' "$2" | sed -n "1{y/$_cb_uc/$_cb_lc/;s/[-_.][-_.]*/-/g;p;}" ;;
	cargo) printf '%s\n' "$2" | sed -n "1{y/$_cb_uc/$_cb_lc/;s/_/-/g;p;}" ;;
	*) printf '%s\n' "$2" | sed -n "1{y/$_cb_uc/$_cb_lc/;p;}" ;;
	esac
}

# _cb_key FAMILY NAME KEY: block NAME when KEY's hash is banned.
_cb_key() {
	_cbk_h=$(printf '%s' "$3" | sha256sum)
	_cbk_h=${_cbk_h%% *}
	case $_cbc_l in *" $_cbk_h "*) _cb_block "$2" ;; esac
}

# _cb_check_name FAMILY NAME
_cb_check_name() {
	[ -n "$2" ] || return 0
	case $1 in
	py) _cbc_l=$_cb_h_py ;;
	conda) _cbc_l=$_cb_h_conda ;;
	npm) _cbc_l=$_cb_h_npm ;;
	go) _cbc_l=$_cb_h_go ;;
	cargo) _cbc_l=$_cb_h_cargo ;;
	deb) _cbc_l=$_cb_h_deb ;;
	*) return 0 ;;
	esac
	case $_cbc_l in *[0-9a-f]*) ;; *) return 0 ;; esac
	if [ -z "$_cb_sha_ok" ]; then
		command -v sha256sum >/dev/null 2>&1 ||
			_cb_refuse 'cannot check package names: sha256sum is missing'
		_cb_sha_ok=1
	fi
	_cbc_n=$(_cb_norm "$1" "$2")
	[ -n "$_cbc_n" ] || return 0
	_cb_key "$1" "$2" "$_cbc_n"
	case $1 in
	npm) case $_cbc_n in @*/*) _cb_key "$1" "$2" "${_cbc_n%%/*}" ;; esac ;;
	go)
		_cbc_p=$_cbc_n
		while :; do
			case $_cbc_p in
			?*/*)
				_cbc_p=${_cbc_p%/*}
				_cb_key "$1" "$2" "$_cbc_p"
				;;
			*) break ;;
			esac
		done
		;;
	esac
}

# _cb_loc FAMILY LOCATION: names from a file, directory, URL or VCS location.
_cb_loc() {
	_cbl_s=$2
	if [ "$1" != deb ]; then
		for _cbl_host in github.com gitlab.com bitbucket.org; do
			case $_cbl_s in *"$_cbl_host"*) ;; *) continue ;; esac
			_cbl_r=${_cbl_s#*"$_cbl_host"}
			case $_cbl_r in [/:]*) _cbl_r=${_cbl_r#?} ;; *) continue ;; esac
			case $_cbl_r in */*) _cbl_r=${_cbl_r#*/} ;; *) continue ;; esac
			_cbl_r=${_cbl_r%%[/#?@]*}
			_cbl_r=${_cbl_r%.git}
			_cb_check_name "$1" "$_cbl_r"
			break
		done
	fi
	_cbl_b=${_cbl_s%%[?#]*}
	while :; do
		case $_cbl_b in */) _cbl_b=${_cbl_b%/} ;; *) break ;; esac
	done
	_cbl_b=${_cbl_b##*/}
	_cbl_b=${_cbl_b##*:}
	_cbl_b=${_cbl_b%%@*}
	case $_cbl_b in '' | . | ..) return 0 ;; esac
	for _cbl_e in .tar.gz .tar.bz2 .tar.xz .tar.zst .tgz .tbz2 .tbz .txz .tar .whl .zip .egg .conda .deb .crate .git; do
		case $_cbl_b in *"$_cbl_e")
			_cbl_b=${_cbl_b%"$_cbl_e"}
			break
			;;
		esac
	done
	if [ "$1" = deb ]; then
		_cbl_n=${_cbl_b%%_*}
	else
		# name-version...: dash-separated parts up to one starting with a digit
		_cbl_n=
		_cbl_started=
		_cbl_rest=$_cbl_b
		while :; do
			_cbl_p=${_cbl_rest%%-*}
			case $_cbl_p in [0-9]*) break ;; esac
			if [ -z "$_cbl_started" ]; then
				_cbl_n=$_cbl_p
				_cbl_started=1
			else
				_cbl_n=$_cbl_n-$_cbl_p
			fi
			case $_cbl_rest in *-*) _cbl_rest=${_cbl_rest#*-} ;; *) break ;; esac
		done
	fi
	_cb_check_name "$1" "$_cbl_n"
}

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

_cb_npm_loc() {
	case $1 in
	*://* | git+* | git:* | github:* | gitlab:* | bitbucket:* | gist:* | file:* | link:* | .* | /* | '~'* | *.tgz | *.tar.gz | *.tar) return 0 ;;
	@*) return 1 ;;
	*/*) return 0 ;;
	esac
	return 1
}

_cb_npm() {
	_cb_trim "$1"
	_cbn_s=$_cb_t
	case $_cbn_s in npm:*)
		_cb_npm "${_cbn_s#npm:}"
		return 0
		;;
	esac
	_cbn_hasr=
	case $_cbn_s in
	@*)
		_cbn_x=${_cbn_s#@}
		case $_cbn_x in
		*@*)
			_cbn_h=@${_cbn_x%%@*}
			_cbn_r=${_cbn_x#*@}
			_cbn_hasr=1
			;;
		*) _cbn_h=$_cbn_s ;;
		esac
		;;
	*@*)
		_cbn_h=${_cbn_s%%@*}
		_cbn_r=${_cbn_s#*@}
		_cbn_hasr=1
		;;
	*) _cbn_h=$_cbn_s ;;
	esac
	_cbn_ok=1
	case $_cbn_h in '' | *:* | .* | '~'* | /* | *[[:space:]]*) _cbn_ok= ;; esac
	if [ -n "$_cbn_ok" ]; then
		case $_cbn_h in
		@/* | */) _cbn_ok= ;;
		@*/*/*) _cbn_ok= ;;
		@*/*) ;;
		@*) _cbn_ok= ;;
		*/*) _cbn_ok= ;;
		esac
	fi
	if [ -n "$_cbn_ok" ]; then
		_cb_check_name npm "$_cbn_h"
		if [ -n "$_cbn_hasr" ]; then
			case $_cbn_r in
			npm:*) _cb_npm "${_cbn_r#npm:}" ;;
			*) if _cb_npm_loc "$_cbn_r"; then _cb_loc npm "$_cbn_r"; fi ;;
			esac
		fi
	elif _cb_npm_loc "$_cbn_s"; then
		_cb_loc npm "$_cbn_s"
	fi
}

# _cb_spec FAMILY SPEC: check every name SPEC asks for.
_cb_spec() {
	case $1 in
	py) _cb_py "$2" ;;
	npm) _cb_npm "$2" ;;
	*)
		_cb_trim "$2"
		_cbs_s=$_cb_t
		[ -n "$_cbs_s" ] || return 0
		case $1 in
		conda)
			_cbs_s=${_cbs_s##*::}
			case $_cbs_s in
			*://* | .* | /* | '~'* | *.conda | *.tar.bz2) _cb_loc conda "$_cbs_s" ;;
			*) _cb_check_name conda "${_cbs_s%%[!A-Za-z0-9._-]*}" ;;
			esac
			;;
		cargo)
			case $_cbs_s in
			*://* | .* | /* | '~'*) _cb_loc cargo "$_cbs_s" ;;
			*)
				_cbs_s=${_cbs_s%%@*}
				_cb_check_name cargo "${_cbs_s%%[!A-Za-z0-9_-]*}"
				;;
			esac
			;;
		go)
			case $_cbs_s in .* | /* | -* | *.go | all | std | cmd) return 0 ;; esac
			case $_cbs_s in *@*)
				[ "${_cbs_s#*@}" = none ] && return 0
				_cbs_s=${_cbs_s%%@*}
				;;
			esac
			_cbs_s=${_cbs_s%...}
			while :; do
				case $_cbs_s in */) _cbs_s=${_cbs_s%/} ;; *) break ;; esac
			done
			_cb_check_name go "$_cbs_s"
			;;
		deb)
			case $_cbs_s in
			*.deb | .* | /* | '~'*) _cb_loc deb "$_cbs_s" ;;
			*) _cb_check_name deb "${_cbs_s%%[!A-Za-z0-9.+-]*}" ;;
			esac
			;;
		esac
		;;
	esac
}

# ------------------------------------------------------------ files

_cb_need_awk() {
	command -v awk >/dev/null 2>&1 || _cb_refuse "cannot read $1: awk is missing"
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

# Dependency names of a package.json (and the targets of npm: aliases and
# git/file sources).
_cb_pkgjson() {
	[ -f "$1" ] && [ -r "$1" ] || return 0
	_cb_need_awk "$1"
	_cbf_list=$(awk '
function dep(x) {
	return x == "dependencies" || x == "devDependencies" || x == "optionalDependencies" || x == "peerDependencies" || x == "bundleDependencies" || x == "bundledDependencies"
}
function tok(v) {
	if (isobj[depth] && ek[depth]) { key[depth] = v; if (depth == 2 && dep(sect)) print v; return }
	if (depth == 2 && dep(sect)) {
		if (!isobj[2]) print v
		else if (v ~ /^npm:/) print substr(v, 5)
		else if (v ~ /[\/:]/) print v
	}
}
{ text = text $0 "\n" }
END {
	n = length(text)
	for (i = 1; i <= n; i++) {
		c = substr(text, i, 1)
		if (q) {
			if (c == "\\") { i++; s = s substr(text, i, 1); continue }
			if (c == "\"") { q = 0; tok(s); continue }
			s = s c
			continue
		}
		if (c == "\"") { q = 1; s = ""; continue }
		if (c == "{" || c == "[") {
			depth++; isobj[depth] = (c == "{"); ek[depth] = isobj[depth]
			if (depth == 2) sect = key[1]
			continue
		}
		if (c == "}" || c == "]") { depth--; continue }
		if (c == ":") { ek[depth] = 0; continue }
		if (c == ",") { if (isobj[depth]) ek[depth] = 1; continue }
	}
}
' "$1") || _cb_refuse "cannot read $1"
	_cb_speclist npm "$_cbf_list"
}

# List items of a conda environment file (pip sub-lists included).
_cb_condaenv() {
	_cb_need_awk "$1"
	_cbf_list=$(awk '
/^[ \t]*-[ \t]/ {
	v = $0; sub(/^[ \t]*-[ \t]*/, "", v); sub(/[ \t]+#.*$/, "", v); gsub(/["\047]/, "", v)
	if (v !~ /:[ \t]*$/) print v
}' "$1") || _cb_refuse "cannot read $1"
	_cb_speclist conda "$_cbf_list"
}

# _cb_speclist FAMILY LINES
_cb_speclist() {
	_cbsl_f=$1
	_cbsl_rest=$2
	while [ -n "$_cbsl_rest" ]; do
		_cbsl_one=${_cbsl_rest%%"$_cb_nl"*}
		case $_cbsl_rest in *"$_cb_nl"*) _cbsl_rest=${_cbsl_rest#*"$_cb_nl"} ;; *) _cbsl_rest= ;; esac
		_cb_spec "$_cbsl_f" "$_cbsl_one"
	done
}

# Requirement files are queued (no recursion: sh has no locals) as KIND|PATH.
_cb_q=
_cb_seen='|'
_cb_nq=0
_cb_enqueue() { # KIND PATH BASEDIR
	case $2 in '' | - | *://*) return 0 ;; esac
	case $2 in /*) _cbe_p=$2 ;; *) _cbe_p=$3/$2 ;; esac
	case $_cb_seen in *"|$1|$_cbe_p|"*) return 0 ;; esac
	_cb_seen="$_cb_seen$1|$_cbe_p|"
	_cb_q="$_cb_q$1|$_cbe_p$_cb_nl"
}

_cb_run_queue() {
	while [ -n "$_cb_q" ]; do
		_cbq_e=${_cb_q%%"$_cb_nl"*}
		_cb_q=${_cb_q#*"$_cb_nl"}
		_cb_nq=$((_cb_nq + 1))
		[ "$_cb_nq" -le 64 ] || return 0
		_cbq_k=${_cbq_e%%|*}
		_cbq_f=${_cbq_e#*|}
		if ! [ -f "$_cbq_f" ] || ! [ -r "$_cbq_f" ]; then continue; fi
		case $_cbq_f in */*) _cb_base=${_cbq_f%/*} ;; *) _cb_base=. ;; esac
		[ -n "$_cb_base" ] || _cb_base=/
		case $_cbq_k in
		py)
			case $_cbq_f in
			*.toml) _cb_pyproject "$_cbq_f" ;;
			*) _cb_reqfile "$_cbq_f" ;;
			esac
			;;
		conda)
			case $_cbq_f in
			*.yml | *.yaml) _cb_condaenv "$_cbq_f" ;;
			*) _cb_conda_specfile "$_cbq_f" ;;
			esac
			;;
		esac
	done
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

_cb_conda_specfile() {
	while IFS= read -r _cbr_line || [ -n "$_cbr_line" ]; do
		case $_cbr_line in '#'* | @*) continue ;; esac
		_cbr_line=${_cbr_line%%[[:space:]]#*}
		_cb_spec conda "$_cbr_line"
	done <"$1"
}

# ------------------------------------------------------------ arguments

# Generic option walker. Per tool: _cb_vl (long options taking a value),
# _cb_vs (short letters taking a value), _cb_style (gnu, or go: one dash,
# no clusters) and the callbacks named by _cb_pos_fn (ARG), _cb_opt_fn
# (OPTION VALUE) and _cb_flag_fn (OPTION). A callback sets _cb_stop to end
# the walk (the rest are a launched command's own arguments).
_cb_vl=
_cb_vs=
_cb_style=gnu
_cb_flag_fn=:
_cb_walk() {
	_cb_stop=
	while [ $# -gt 0 ] && [ -z "$_cb_stop" ]; do
		_cbw_a=$1
		shift
		case $_cbw_a in
		--)
			while [ $# -gt 0 ] && [ -z "$_cb_stop" ]; do
				$_cb_pos_fn "$1"
				shift
			done
			;;
		--?* | -?*)
			if [ "$_cb_style" = go ] || [ "${_cbw_a#--}" != "$_cbw_a" ]; then
				case $_cbw_a in *=*)
					$_cb_opt_fn "${_cbw_a%%=*}" "${_cbw_a#*=}"
					continue
					;;
				esac
				case " $_cb_vl " in
				*" $_cbw_a "* | *" -${_cbw_a#--} "*) _cbw_v=1 ;;
				*) if _cb_abbrev_takes "$_cbw_a"; then _cbw_v=1; else _cbw_v=; fi ;;
				esac
				if [ -n "$_cbw_v" ]; then
					if [ $# -gt 0 ]; then
						$_cb_opt_fn "$_cbw_a" "$1"
						shift
					else
						$_cb_opt_fn "$_cbw_a" ''
					fi
				else
					$_cb_flag_fn "$_cbw_a"
				fi
				continue
			fi
			_cbw_c=${_cbw_a#-}
			while [ -n "$_cbw_c" ]; do
				_cbw_r=${_cbw_c#?}
				_cbw_ch=${_cbw_c%"$_cbw_r"}
				_cbw_c=$_cbw_r
				case $_cb_vs in *"$_cbw_ch"*)
					if [ -n "$_cbw_c" ]; then
						$_cb_opt_fn "-$_cbw_ch" "$_cbw_c"
					elif [ $# -gt 0 ]; then
						$_cb_opt_fn "-$_cbw_ch" "$1"
						shift
					else
						$_cb_opt_fn "-$_cbw_ch" ''
					fi
					_cbw_c=
					;;
				*) $_cb_flag_fn "-$_cbw_ch" ;;
				esac
			done
			;;
		*) $_cb_pos_fn "$_cbw_a" ;;
		esac
	done
}

# pip (optparse) accepts unambiguous prefixes of long options: `--req`.
# True when $1 abbreviates a value-taking option and is not itself a flag
# (_cb_flags: flags that are prefixes of value options).
_cb_abbrev_takes() {
	[ -n "$_cb_abbrev" ] || return 1
	_cb_in "$1" "$_cb_flags" && return 1
	for _cba_o in $_cb_vl; do
		case $_cba_o in "$1"*) return 0 ;; esac
	done
	return 1
}

# The first positional naming a known subcommand selects it; one naming a
# subcommand that installs nothing ends the walk. Others (values of options
# we do not know) are skipped.
_cb_find_sub() {
	case " $_cb_subs_check " in *" $1 "*)
		_cb_sub=$1
		return 0
		;;
	esac
	case " $_cb_subs_pass " in *" $1 "*)
		_cb_sub=-
		_cb_stop=1
		;;
	esac
	return 0
}

_cb_in() { # WORD LIST
	case " $2 " in *" $1 "*) return 0 ;; esac
	return 1
}

# ---- Python tools

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


# ---- conda family

_cb_conda_pos() {
	case $_cb_sub in
	'') _cb_find_sub "$1" ;;
	env)
		case $1 in create | update) _cb_sub=env-$1 ;; *) _cb_sub=- _cb_stop=1 ;; esac
		;;
	install | create) _cb_spec conda "$1" ;;
	esac
}

_cb_conda_opt() {
	case $_cb_sub in '' | -) return 0 ;; esac
	case $1 in
	-f | --file)
		_cb_enqueue conda "$2" .
		return 0
		;;
	esac
	_cb_in "$1" "$_cb_skip" && return 0
	_cb_spec conda "$2"
}

_cb_t_conda() {
	_cb_vl='-n --name -p --prefix -c --channel --file -f --repodata-fn --solver --subdir --platform --clone -r --root-prefix --rc-file --experimental --channel-priority --channel-alias --category --json-format --log-level --relocate-prefix'
	_cb_vs=npcfr
	_cb_skip='-n --name -p --prefix -c --channel --repodata-fn --solver --subdir --platform --clone -r --root-prefix --rc-file --experimental --channel-priority --channel-alias --category --json-format --log-level --relocate-prefix'
	_cb_subs_check='install create env'
	_cb_subs_pass='activate deactivate run list remove uninstall update upgrade search info config clean compare init package rename notices doctor shell self repoquery help'
	_cb_pos_fn=_cb_conda_pos
	_cb_opt_fn=_cb_conda_opt
	_cb_walk "$@"
	_cb_run_queue
}

# ---- JavaScript tools

# npm init/create, pnpm/yarn/bun create: `foo` runs the package create-foo.
_cb_create() {
	case $1 in
	-* | '') return 0 ;;
	@*/*) _cb_spec npm "${1%%/*}/create-${1#*/}" ;;
	@*) _cb_spec npm "$1/create" ;;
	*) _cb_spec npm "create-$1" ;;
	esac
}

_cb_js_pos() {
	case $_cb_sub in
	'')
		_cb_find_sub "$1"
		case $_cb_sub in
		'' | - | global) ;;
		exec | x | dlx) _cb_kind='exec' ;;
		init | create | innit | c) _cb_kind=create ;;
		*) _cb_kind=add ;;
		esac
		;;
	global)
		case $1 in add) _cb_sub=add _cb_kind=add _cb_global=1 ;; *) _cb_sub=- _cb_stop=1 ;; esac
		;;
	-) ;;
	*)
		case $_cb_kind in
		add) _cb_spec npm "$1" ;;
		exec)
			_cb_spec npm "$1"
			_cb_stop=1
			;;
		create)
			_cb_create "$1"
			_cb_stop=1
			;;
		esac
		;;
	esac
}

_cb_js_flag() {
	case $1 in -g | --global) _cb_global=1 ;; esac
}

_cb_js_opt() {
	case $1 in
	--prefix | --dir | -C | --cwd) _cb_pjdir=$2 ;;
	--location) [ "$2" = global ] && _cb_global=1 ;;
	esac
	case $_cb_sub in '' | - | global) return 0 ;; esac
	case $1 in --package | -p)
		_cb_spec npm "$2"
		return 0
		;;
	esac
	_cb_in "$1" "$_cb_skip" && return 0
	_cb_spec npm "$2"
}

_cb_t_js() {
	_cb_vl='--prefix --registry --cache --userconfig --globalconfig --loglevel --workspace -w --tag --omit --include --install-strategy --save-prefix --otp --before --cpu --os --libc --node-options --script-shell --shell --call -c --package -p --filter -F --dir -C --workspace-dir --store-dir --reporter --lockfile-dir --modules-dir --virtual-store-dir --node-linker --cwd --modules-folder --cache-folder --network-timeout --mutex --mode --global-folder --link-folder --network-concurrency --child-concurrency --proxy --https-proxy --backend --config --cafile --ca --cache-dir --location'
	_cb_skip='--prefix --registry --cache --userconfig --globalconfig --loglevel --workspace -w --tag --omit --include --install-strategy --save-prefix --otp --before --cpu --os --libc --node-options --script-shell --shell --call -c --filter -F --dir -C --workspace-dir --store-dir --reporter --lockfile-dir --modules-dir --virtual-store-dir --node-linker --cwd --modules-folder --cache-folder --network-timeout --mutex --mode --global-folder --link-folder --network-concurrency --child-concurrency --proxy --https-proxy --backend --config --cafile --ca --cache-dir --location'
	_cb_pos_fn=_cb_js_pos
	_cb_opt_fn=_cb_js_opt
	_cb_flag_fn=_cb_js_flag
	_cb_global=
	_cb_pjdir=.
	case $_cb_tool in
	npm)
		_cb_vs=wcpC
		_cb_subs_check='install i in ins inst insta instal isnt isnta isntal isntall add install-test it ci clean-install ic install-clean isntall-clean update up upgrade udpate exec x init create innit'
		_cb_subs_pass='run run-script rum urn test t tst start stop restart ls list ll la uninstall unlink remove rm r un view v info show search s se find config c get set pack publish version audit outdated prune dedupe ddp rebuild rb link ln cache help explain why fund doctor diff dist-tag pkg ping prefix root bin query sbom shrinkwrap login logout whoami unpublish deprecate owner team org token access adduser edit explore completion bugs docs home repo star unstar stars hook'
		;;
	pnpm)
		_cb_vs=FC
		_cb_subs_check='add install i dlx create update up upgrade'
		_cb_subs_pass='run test t exec start list ls ll remove rm un uninstall why outdated store publish pack config init link ln unlink audit rebuild rb prune import fetch env setup deploy patch patch-commit server licenses help root bin'
		;;
	yarn | yarnpkg)
		_cb_vs=p
		_cb_subs_check='add install dlx create global upgrade up'
		_cb_subs_pass='run test start remove list info why init link unlink pack publish version config cache bin exec node workspace workspaces set plugin help audit outdated autoclean check licenses login logout owner tag team unplug rebuild npm constraints explain patch'
		;;
	bun)
		_cb_vs='cp'
		_cb_subs_check='add a install i x create c update'
		_cb_subs_pass='run test build init remove rm pm link unlink outdated publish upgrade repl exec patch audit info why help'
		;;
	npx | pnpx | bunx)
		_cb_vs=cpw
		_cb_sub='exec'
		_cb_kind='exec'
		;;
	esac
	_cb_walk "$@"
	case $_cb_sub in - | global) return 0 ;; esac
	if [ -z "$_cb_sub" ]; then
		# bare yarn and bun (no subcommand) install the project
		case $_cb_tool in yarn | yarnpkg) ;; *) return 0 ;; esac
		_cb_kind=add
	fi
	# Installing in a project installs its package.json dependencies too.
	if [ "$_cb_kind" = add ] && [ -z "$_cb_global" ]; then
		case $_cb_sub in update | up | upgrade | udpate) ;; *) _cb_pkgjson "$_cb_pjdir/package.json" ;; esac
	fi
}

# ---- go, cargo, apt, dpkg

_cb_go_pos() {
	case $_cb_sub in
	'') _cb_find_sub "$1" ;;
	mod) case $1 in download) _cb_sub=mod-download ;; *) _cb_sub=- _cb_stop=1 ;; esac ;;
	get | install | mod-download) _cb_spec go "$1" ;;
	run)
		# go run [files.go...|package] [arguments...]
		case $1 in *.go)
			_cb_sub=run-files
			return 0
			;;
		esac
		_cb_spec go "$1"
		_cb_stop=1
		;;
	run-files) case $1 in *.go) ;; *) _cb_stop=1 ;; esac ;;
	esac
}

_cb_t_go() {
	_cb_style=go
	_cb_vl='-C -o -p -gcflags -ldflags -asmflags -gccgoflags -tags -mod -modfile -overlay -pkgdir -buildmode -compiler -installsuffix -toolexec -pgo -covermode -coverpkg -exec -debug-actiongraph -debug-runtime-trace -debug-trace'
	_cb_subs_check='get install run mod'
	_cb_subs_pass='build test vet fmt generate list env version clean doc fix tool bug work telemetry help'
	_cb_pos_fn=_cb_go_pos
	_cb_opt_fn=:
	_cb_walk "$@"
}

_cb_cargo_pos() {
	case $_cb_sub in
	'') _cb_find_sub "$1" ;;
	-) ;;
	*) _cb_spec cargo "$1" ;;
	esac
}

_cb_cargo_opt() {
	case $_cb_sub in '' | -) return 0 ;; esac
	case $1 in --git | --path | --rename) _cb_spec cargo "$2" ;; esac
}

_cb_t_cargo() {
	_cb_vl='--git --path --rename -p --package -F --features --registry --target --manifest-path --branch --tag --rev --lockfile-path --vers --version --root --bin --example --index --target-dir -j --jobs --profile --config -Z --color --message-format'
	_cb_vs=pFjZ
	_cb_subs_check='add install binstall'
	_cb_subs_pass='build b check c run r test t bench doc new init remove rm update search publish fetch tree clean fmt clippy metadata vendor generate-lockfile help uninstall login logout owner package pkgid locate-project report fix yank version verify-project'
	_cb_pos_fn=_cb_cargo_pos
	_cb_opt_fn=_cb_cargo_opt
	_cb_walk "$@"
}

_cb_apt_pos() {
	case $_cb_sub in
	'') _cb_find_sub "$1" ;;
	-) ;;
	*) _cb_spec deb "$1" ;;
	esac
}

_cb_t_apt() {
	_cb_vl='-o --option -c --config-file -t --target-release --default-release -a --host-architecture'
	_cb_vs=octa
	_cb_subs_check='install reinstall download source'
	_cb_subs_pass='update upgrade full-upgrade dist-upgrade remove purge autoremove autopurge search show list policy depends rdepends changelog clean autoclean check build-dep satisfy edit-sources moo help'
	_cb_pos_fn=_cb_apt_pos
	_cb_opt_fn=:
	_cb_walk "$@"
}

_cb_dpkg_pos() { _cb_files="$_cb_files$1$_cb_nl"; }
_cb_dpkg_opt() { :; }

_cb_t_dpkg() {
	_cb_vl='--root --admindir --instdir --log --status-fd --status-logger -D --debug'
	_cb_vs=D
	_cb_files=
	_cb_pos_fn=_cb_dpkg_pos
	_cb_opt_fn=_cb_dpkg_opt
	_cb_install=
	for _cbx in "$@"; do
		case $_cbx in
		--) break ;;
		-i | --install | --unpack | -x | --extract | -X | --vextract) _cb_install=1 ;;
		--*) ;;
		-*i*) _cb_install=1 ;;
		esac
	done
	[ -n "$_cb_install" ] || return 0
	_cb_walk "$@"
	_cb_speclist deb "$_cb_files"
}

# ------------------------------------------------------------ main

_cb_goroot=
_cb_sha_ok=
_cb_sub=
_cb_kind=
_cb_base=.
_cb_projdir=
_cb_projopts=
_cb_abbrev=
_cb_flags=
_cb_fileopts=
_cb_editopts=
_cb_skip=
_cb_select
case $_cb_tool in
pip | pip[0-9]*) _cb_t_pip "$@" ;;
uv | uvx) _cb_t_uv "$@" ;;
pipx) _cb_t_pipx "$@" ;;
poetry) _cb_t_poetry "$@" ;;
pdm) _cb_t_pdm "$@" ;;
conda | mamba | micromamba) _cb_t_conda "$@" ;;
npm | npx | pnpm | pnpx | yarn | yarnpkg | bun | bunx) _cb_t_js "$@" ;;
go) _cb_t_go "$@" ;;
cargo) _cb_t_cargo "$@" ;;
apt | apt-get) _cb_t_apt "$@" ;;
dpkg) _cb_t_dpkg "$@" ;;
esac
_cb_run "$@"
