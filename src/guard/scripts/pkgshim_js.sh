# cbrun package-manager shim: the JavaScript tools (npm, npx, pnpm, yarn, bun).
# Spliced into pkgshim.sh before its main part (see src/guard/pkgshim/).

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
