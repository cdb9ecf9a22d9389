//! Landlock, applied by the command process to itself just before exec.
//!
//! Reads are allowed across the whole view (the view is already the allowlist); writes
//! only beneath the policy's writable trees and to its writable device files. The mount
//! view and Landlock are two independent locks on the same door: a writable mount the
//! policy does not list is still read-only for the process, and a read-only mount (such
//! as `.git` inside a writable workspace, which Landlock alone cannot express) stays so.
//! A Landlock-restricted process can no longer mount, unmount or pivot, so the view
//! cannot be taken apart from inside.
//!
//! Required: ABI 3 (Linux 6.2: truncation is controlled; before it, any file could be
//! truncated). With network access, ABI 6 (Linux 6.12) is required too, to keep the
//! host's abstract unix sockets and processes out of reach; without network the
//! sandbox's own namespaces already do that and ABI 6 scoping is added where present.
//! Where the kernel has ABI 5 (Linux 6.10), ioctls on devices are denied too; the core
//! defence against terminal injection is elsewhere and needs no ABI: the process runs
//! in a session of its own, without a controlling terminal, and no terminal device is
//! in its view.

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::helper::{SetupError, Stage};
use super::policy::Policy;
use super::sys;

/// The lowest Landlock ABI the sandbox runs on.
pub const MIN_ABI: i32 = 3;
/// The ABI that scopes signals and abstract unix sockets.
pub const SCOPE_ABI: i32 = 6;

fn failed(what: &str, e: impl std::fmt::Display) -> SetupError {
    SetupError::new_landlock(format!("{what}: {e}"))
}

/// Restricts the calling process; returns the kernel's Landlock ABI.
pub fn restrict(policy: &Policy) -> Result<i32, SetupError> {
    let abi = sys::landlock_abi();
    if abi < MIN_ABI {
        return Err(SetupError::new_landlock(format!(
            "Landlock ABI {MIN_ABI} (Linux 6.2) is needed to confine writes; this kernel offers {}",
            if abi == 0 {
                "none (not built in, or not enabled with lsm=…landlock at boot)".to_owned()
            } else {
                format!("ABI {abi}")
            }
        )));
    }
    if policy.network && abi < SCOPE_ABI {
        return Err(SetupError::new_landlock(format!(
            "network access for agent commands needs Landlock ABI {SCOPE_ABI} (Linux 6.12) to keep \
             the host's abstract unix sockets out of reach; this kernel offers ABI {abi}"
        )));
    }
    let scope_level = if policy.network {
        CompatLevel::HardRequirement
    } else {
        CompatLevel::BestEffort
    };
    // Device ioctls (`TIOCSTI`, `TIOCLINUX` on a terminal, anything on any device) are
    // handled where the kernel can (ABI 5) and never granted, not even beneath writable
    // trees.
    let read = AccessFs::from_read(ABI::V5);
    let mut all = AccessFs::from_all(ABI::V5);
    all.remove(AccessFs::IoctlDev);
    let mut file = AccessFs::from_file(ABI::V5);
    file.remove(AccessFs::IoctlDev);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V3))
        .and_then(|r| {
            r.set_compatibility(CompatLevel::BestEffort)
                .handle_access(AccessFs::from_all(ABI::V5))
        })
        .and_then(|r| {
            r.set_compatibility(scope_level)
                .scope(Scope::from_all(ABI::V6))
        })
        .and_then(|r| r.set_compatibility(CompatLevel::BestEffort).create())
        .map_err(|e| failed("creating the ruleset", e))?;
    let mut add = |path: &std::path::Path, access| -> Result<(), SetupError> {
        let fd =
            PathFd::new(path).map_err(|e| failed(&format!("opening {}", path.display()), e))?;
        (&mut ruleset)
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| failed(&format!("allowing {}", path.display()), e))?;
        Ok(())
    };
    add(std::path::Path::new("/"), read)?;
    for path in &policy.writable {
        add(path, all)?;
    }
    for path in &policy.writable_files {
        add(path, file)?;
    }
    let status = ruleset
        .restrict_self()
        .map_err(|e| failed("restricting the process", e))?;
    if status.ruleset == RulesetStatus::NotEnforced || !status.no_new_privs {
        return Err(SetupError::new_landlock(format!(
            "the kernel did not enforce the ruleset ({status:?})"
        )));
    }
    Ok(abi)
}

impl SetupError {
    fn new_landlock(message: String) -> Self {
        Self::at_stage(Stage::Landlock, message)
    }
}
