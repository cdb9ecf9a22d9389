//! Checkpoints of a worktree that outlives one agent (a crew executor's, kept across
//! revisions): its state committed under a hidden ref without touching the worktree, so
//! a resumed run can check out a fresh worktree at the same base with the same changes
//! in it, as if the killed process had never let go of it.

use git2::Oid;
use git2::build::CheckoutBuilder;

use super::error::WorktreeError;
use super::{Worktree, WorktreeManager, git, sanitize_branch_component, sanitize_message};

/// Where the checkpoints of run `run_id` live (`refs/crewbox/checkpoints/<run>`): not a
/// branch, so branch listings and cleanups leave it alone.
pub fn checkpoint_ref(run_id: &str) -> String {
    format!(
        "refs/crewbox/checkpoints/{}",
        sanitize_branch_component(run_id)
    )
}

impl WorktreeManager {
    /// Commits the working tree of `wt` as it is (untracked files included, ignored
    /// ones left out) on top of its HEAD, points `reference` at that commit and returns
    /// it (hex id). The worktree, its index and its HEAD are left as they were.
    pub async fn checkpoint(
        &self,
        wt: &Worktree,
        reference: &str,
        message: &str,
    ) -> Result<String, WorktreeError> {
        let wt = self.inner.handle(wt)?;
        let reference = reference.to_owned();
        let message = sanitize_message(message);
        self.blocking(move |inner| {
            let checked = inner.checked_active(&wt)?;
            let snap = git::snapshot(&checked, wt.base_commit, inner.opts.commit)?;
            let (repo, path, head, tree) = (&checked.repo, &checked.path, snap.head, snap.tree);
            let sig = git2::Signature::now(&inner.opts.identity.name, &inner.opts.identity.email)
                .map_err(WorktreeError::git("make signature", &path))?;
            let parent = repo
                .find_commit(head)
                .map_err(WorktreeError::git("find HEAD commit", &path))?;
            let tree = repo
                .find_tree(tree)
                .map_err(WorktreeError::git("find tree", &path))?;
            let commit = repo
                .commit(None, &sig, &sig, &message, &tree, &[&parent])
                .map_err(WorktreeError::git("commit checkpoint", &path))?;
            // Refs are shared with the main repository; write it there, under the lock.
            let _guard = inner.lock_repo();
            let main = git::open(&inner.repo_root)?;
            main.reference(&reference, commit, true, "crewbox checkpoint")
                .map_err(WorktreeError::git(
                    "update checkpoint ref",
                    &inner.repo_root,
                ))?;
            Ok(commit.to_string())
        })
        .await
    }

    /// A worktree for `agent_id` at commit `base` whose working tree holds the state of
    /// checkpoint `work` (uncommitted, so its diff and its branch are still against
    /// `base`).
    pub async fn acquire_with_work(
        &self,
        agent_id: &str,
        base: &str,
        work: &str,
    ) -> Result<Worktree, WorktreeError> {
        let root = self.inner.repo_root.clone();
        let parse = |id: &str| Oid::from_str(id).map_err(WorktreeError::git("parse commit", &root));
        let (base, work) = (parse(base)?, parse(work)?);
        let agent_id = agent_id.to_owned();
        self.blocking(move |inner| {
            let wt = inner.acquire_from(agent_id, Some(base))?;
            let restored = (|| {
                let checked = inner.checked_active(&wt)?;
                super::git::clear_links(&wt.path)?;
                let repo = &checked.repo;
                let tree = repo
                    .find_commit(work)
                    .and_then(|c| c.tree())
                    .map_err(WorktreeError::git("find checkpoint", &wt.path))?;
                let mut co = CheckoutBuilder::new();
                co.force().remove_untracked(true);
                repo.checkout_tree(tree.as_object(), Some(&mut co))
                    .map_err(WorktreeError::git("checkout checkpoint", &wt.path))
            })();
            match restored {
                Ok(()) => Ok(wt),
                Err(e) => {
                    if let Ok(slot) = inner.take_active(&wt) {
                        inner.release(slot);
                    }
                    Err(e)
                }
            }
        })
        .await
    }

    /// Deletes `reference` (a checkpoint no longer needed); a missing one is fine.
    pub async fn drop_reference(&self, reference: &str) -> Result<(), WorktreeError> {
        let reference = reference.to_owned();
        self.blocking(move |inner| {
            let _guard = inner.lock_repo();
            let repo = git::open(&inner.repo_root)?;
            match repo.find_reference(&reference) {
                Ok(mut r) => r.delete().map_err(WorktreeError::git(
                    "delete checkpoint ref",
                    &inner.repo_root,
                )),
                Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(()),
                Err(e) => Err(WorktreeError::git("find checkpoint ref", &inner.repo_root)(
                    e,
                )),
            }
        })
        .await
    }
}
