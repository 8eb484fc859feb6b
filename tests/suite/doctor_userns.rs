//! `cbrun doctor` where user namespaces are off: it says so plainly, with
//! the administrator's fix, and exits 2; `cbrun sandbox run` refuses
//! (no fallback to weaker isolation). For real: inside a user namespace
//! whose `user.max_user_namespaces` is 0 (as root). Through the doctor's
//! test hook (`CBRUN_TEST_PROC_SYS`, a fake /proc/sys tree), as nobody:
//! `kernel.unprivileged_userns_clone=0` and AppArmor's
//! `kernel.apparmor_restrict_unprivileged_userns=1`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::common::*;

#[test]
fn max_user_namespaces_zero_is_named_with_its_fix_and_nothing_runs() {
    let ctx = Ctx::new(Who::Root, "doctor-userns");
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces || exit 99; \
         {bin} doctor > {out}/doctor.txt; echo $? > {out}/doctor.rc; \
         {bin} sandbox run -- /bin/true 2> {out}/run.err; echo $? > {out}/run.rc",
        bin = CBRUN,
        out = ctx.out.display()
    );
    let st = Command::new("unshare")
        .args(["--user", "--map-root-user", "sh", "-c", &script])
        .status()
        .unwrap();
    assert!(
        st.success(),
        "the nested user namespace could not be set up"
    );
    let read = |n: &str| fs::read_to_string(ctx.out.join(n)).unwrap();
    assert_eq!(read("doctor.rc").trim(), "2", "{}", read("doctor.txt"));
    let text = read("doctor.txt");
    assert!(
        text.contains("user namespaces are disabled on this host (user.max_user_namespaces=0)")
            && text.contains("does not fall back")
            && text.contains("sysctl -w user.max_user_namespaces=15000")
            && text.contains("/etc/sysctl.d/"),
        "{text}"
    );
    assert!(text.contains("NO sandbox possible"), "{text}");
    assert_eq!(read("run.rc").trim(), "125", "{}", read("run.err"));
}

#[test]
fn disabled_sysctls_are_named_with_their_fix_for_users() {
    let ctx = Ctx::new(Who::Delegated, "doctor-fake");
    let cases = [
        (
            "kernel/unprivileged_userns_clone",
            "0",
            "kernel.unprivileged_userns_clone=0",
            "sysctl -w kernel.unprivileged_userns_clone=1",
        ),
        (
            "kernel/apparmor_restrict_unprivileged_userns",
            "1",
            "kernel.apparmor_restrict_unprivileged_userns=1",
            "`userns,` rule",
        ),
        (
            "user/max_user_namespaces",
            "0",
            "user.max_user_namespaces=0",
            "sysctl -w user.max_user_namespaces=15000",
        ),
    ];
    for (i, (file, value, named, fix)) in cases.iter().enumerate() {
        let fake = ctx.dir.join(format!("proc-sys-{i}"));
        let p = fake.join(file);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, format!("{value}\n")).unwrap();
        fs::write(
            fake.join("user/max_user_namespaces"),
            if *named == "user.max_user_namespaces=0" {
                "0\n"
            } else {
                "15000\n"
            },
        )
        .ok();
        Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(&fake)
            .status()
            .unwrap();
        fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
        let args: Vec<String> = vec!["doctor".into()];
        let r = ctx
            .spawn_args(
                &args,
                &[("CBRUN_TEST_PROC_SYS", fake.to_str().unwrap())],
                None,
            )
            .wait(DEFAULT_DEADLINE);
        r.assert_code(2, named);
        assert!(
            r.stdout.contains(named) && r.stdout.contains(fix),
            "{named}: {}",
            r.show()
        );
        assert!(
            r.stdout.contains("does not fall back"),
            "{named}: {}",
            r.show()
        );
        assert!(
            r.stdout.contains("NO sandbox possible"),
            "{named}: {}",
            r.show()
        );
    }
    // Without the hook, this host allows them: the same user's doctor passes.
    let r = ctx.cbrun(&["doctor"]);
    r.assert_code(0, "doctor on this host");
}
