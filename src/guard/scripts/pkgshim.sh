#!/bin/sh
# cbrun package-manager shim (generated; see src/guard/pkgshim/).
# Refuses installs of names on the case's denylist, then runs the real tool
# with its arguments untouched. Bans are stored as sha256 hashes of their
# normalised names. A tripwire, not a wall: what keeps packages out is the
# network policy and cbrun's registry index, which refuses banned PyPI and
# npm packages however they are asked for.

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

# _cb_spec FAMILY SPEC: check every name SPEC asks for. The families
# other than py and npm get the trimmed spec in $_cbs_s.
_cb_spec() {
	case $1 in
	py) _cb_py "$2" ;;
	npm) _cb_npm "$2" ;;
	conda | cargo | go | deb)
		_cb_trim "$2"
		_cbs_s=$_cb_t
		[ -n "$_cbs_s" ] || return 0
		_cb_spec_$1
		;;
	esac
}

# ------------------------------------------------------------ files

_cb_need_awk() {
	command -v awk >/dev/null 2>&1 || _cb_refuse "cannot read $1: awk is missing"
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

# Per-ecosystem parts: scripts/pkgshim_{python,conda,js,system}.sh.
@@CBRUN_ECOSYSTEMS@@

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
