# cbrun package-manager shim: conda, mamba and micromamba.
# Spliced into pkgshim.sh before its main part (see src/guard/pkgshim/).

_cb_spec_conda() {
	_cbs_s=${_cbs_s##*::}
	case $_cbs_s in
	*://* | .* | /* | '~'* | *.conda | *.tar.bz2) _cb_loc conda "$_cbs_s" ;;
	*) _cb_check_name conda "${_cbs_s%%[!A-Za-z0-9._-]*}" ;;
	esac
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

_cb_conda_specfile() {
	while IFS= read -r _cbr_line || [ -n "$_cbr_line" ]; do
		case $_cbr_line in '#'* | @*) continue ;; esac
		_cbr_line=${_cbr_line%%[[:space:]]#*}
		_cb_spec conda "$_cbr_line"
	done <"$1"
}

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
