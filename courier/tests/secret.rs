//! The job secret does not linger (issue #14): a locality takes
//! `COURIER_SECRET` out of its environment once it has read it, so that
//! processes its actions start do not inherit it.

mod common;

use std::process::Command;

/// What a process started by an action sees of the secret, and whether
/// this process still has it.
#[courier::action]
fn secret_seen() -> (String, bool) {
    let child = Command::new("sh")
        .args(["-c", "echo ${COURIER_SECRET:-none}"])
        .output()
        .expect("cannot run sh");
    (
        String::from_utf8_lossy(&child.stdout).trim().to_owned(),
        std::env::var_os("COURIER_SECRET").is_some(),
    )
}

#[test]
fn the_secret_is_not_inherited_by_what_actions_start() {
    let seen = courier::launch(
        common::tcp("the_secret_is_not_inherited_by_what_actions_start", 3),
        |rt| async move {
            let mut seen = Vec::new();
            for l in rt.localities() {
                seen.push(rt.call(l, secret_seen, ()).await?);
            }
            Ok(seen)
        },
    )
    .unwrap();
    assert_eq!(seen.len(), 3);
    for (locality, (child, here)) in seen.iter().enumerate() {
        assert_eq!(
            child, "none",
            "locality {locality}'s subprocess saw the secret"
        );
        assert!(!here, "locality {locality} still has COURIER_SECRET");
    }
}
