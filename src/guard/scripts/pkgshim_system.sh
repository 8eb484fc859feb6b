# cbrun package-manager shim: go, cargo, apt and dpkg.
# Spliced into pkgshim.sh before its main part (see src/guard/pkgshim/).

_cb_spec_cargo() {
	case $_cbs_s in
	*://* | .* | /* | '~'*) _cb_loc cargo "$_cbs_s" ;;
	*)
		_cbs_s=${_cbs_s%%@*}
		_cb_check_name cargo "${_cbs_s%%[!A-Za-z0-9_-]*}"
		;;
	esac
}

_cb_spec_go() {
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
}

_cb_spec_deb() {
	case $_cbs_s in
	*.deb | .* | /* | '~'*) _cb_loc deb "$_cbs_s" ;;
	*) _cb_check_name deb "${_cbs_s%%[!A-Za-z0-9.+-]*}" ;;
	esac
}

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
