//! Caps on what a team definition may hold, and the ceiling on what a repository's
//! team may make its members do.
//!
//! Caps (every source): a charter at most [`MAX_CHARTER_CHARS`] characters, shared
//! context, routing and orchestrator instructions at most [`MAX_CONTEXT_CHARS`] each,
//! at most [`MAX_MEMBERS`] members and [`MAX_VALIDATORS`] validators per list. Over a
//! cap, text is cut on a character boundary with a visible `[truncated]` marker (extra
//! entries are dropped) and the team carries a warning; it never fails.
//!
//! Ceiling (repository teams): a member gets min(requested, ceiling). In an untrusted
//! repository every member is read-only and the team picks no provider, model or
//! validator (those fall back to the run's); in a trusted one a native member keeps
//! its access, an imported pack's member (Squad, Claude) stays read-only unless the
//! user raised the pack ceiling, and a team may only name providers the user has.
//! Members from the user's own files get what they ask for. A read-only run
//! (`crewbox run --read-only`) lowers every agent again.

use crate::trust::Trust;
use crate::trust::read::cap_chars;

use super::file::{Access, Team, TeamFormat, TeamSource};

/// The longest charter, in characters.
pub const MAX_CHARTER_CHARS: usize = 4_000;
/// The longest shared context, routing hints or orchestrator instructions.
pub const MAX_CONTEXT_CHARS: usize = 8_000;
/// The most members a team keeps.
pub const MAX_MEMBERS: usize = 64;
/// The most validators in one list (a team's, or a member's).
pub const MAX_VALIDATORS: usize = 16;
/// The most team files read from one directory.
pub const MAX_TEAM_FILES: usize = 128;

/// The warning for text cut at `cap` characters.
pub(super) fn cut_warning(what: &str, cap: usize) -> String {
    format!("{what} is longer than {cap} characters and was cut ([truncated])")
}

/// Keeps the first [`MAX_VALIDATORS`] entries, warning when it drops any.
pub(super) fn cap_list(
    mut list: Vec<String>,
    what: &str,
    warnings: &mut Vec<String>,
) -> Vec<String> {
    if list.len() > MAX_VALIDATORS {
        warnings.push(format!(
            "{what}: {} entries; only the first {MAX_VALIDATORS} are kept",
            list.len()
        ));
        list.truncate(MAX_VALIDATORS);
    }
    list
}

/// Cuts the team-wide texts to [`MAX_CONTEXT_CHARS`].
pub(super) fn cap_texts(team: &mut Team) {
    let cut = |what: &str, text: Option<&mut String>, warnings: &mut Vec<String>| {
        if let Some(t) = text
            && cap_chars(t, MAX_CONTEXT_CHARS)
        {
            warnings.push(cut_warning(what, MAX_CONTEXT_CHARS));
        }
    };
    cut(
        "shared_context",
        team.shared_context.as_mut(),
        &mut team.warnings,
    );
    cut("routing", team.routing.as_mut(), &mut team.warnings);
    cut(
        "[orchestrator] instructions",
        team.orchestrator
            .as_mut()
            .and_then(|o| o.instructions.as_mut()),
        &mut team.warnings,
    );
}

/// What the user allows teams of a repository.
#[derive(Clone, Debug, Default)]
pub struct TeamPolicy {
    /// Whether the user trusts the repository.
    pub trust: Trust,
    /// The user's provider names: the only ones a repository team may select.
    pub providers: Vec<String>,
    /// The most a member of an imported repository pack (Squad, Claude) may do in a
    /// trusted repository: read-only unless the user opts in (`[packs] max_access` in
    /// the user's config, or `crewbox trust --pack-access`).
    pub pack_access: Access,
}

/// `member `a`` or `members `a`, `b``.
fn who(names: &[String]) -> String {
    if names.len() == 1 {
        format!("member `{}`", names[0])
    } else {
        format!("members `{}`", names.join("`, `"))
    }
}

/// The lower of two access levels.
pub fn min_access(a: Access, b: Access) -> Access {
    match (a, b) {
        (Access::Full, Access::Full) => Access::Full,
        (Access::ReadOnly, _) | (_, Access::ReadOnly) => Access::ReadOnly,
    }
}

impl TeamPolicy {
    /// The most a member of a repository team in `format` may do.
    pub fn ceiling_for(&self, format: TeamFormat) -> Access {
        match (self.trust, format.is_pack()) {
            (Trust::Untrusted, _) => Access::ReadOnly,
            (Trust::Trusted, false) => Access::Full,
            (Trust::Trusted, true) => self.pack_access,
        }
    }

    /// The most a repository's native team member may do.
    pub fn ceiling(&self) -> Access {
        self.ceiling_for(TeamFormat::Crewbox)
    }

    /// Why the ceiling of `format` is read-only, for the warning.
    fn why(&self, format: TeamFormat) -> &'static str {
        if !self.trust.is_trusted() {
            "the repository is not trusted"
        } else if format.is_pack() {
            "imported packs are read-only until you allow more: `[packs] max_access = \"full\"` \
             in your config, or `crewbox trust --pack-access full`"
        } else {
            "the ceiling"
        }
    }

    /// Applies the ceilings to a team: every member gets min(requested, ceiling of
    /// where it was defined) — a repository member the repository's ceiling, a member
    /// from the user's own files what it asks for. The repository's provider, model
    /// and validator choices are checked too. (A read-only run lowers every agent
    /// again when it starts: `RunRequest::read_only`.)
    pub fn apply(&self, team: &mut Team) {
        let repo_team = matches!(team.source, TeamSource::Repo(_));
        let untrusted = !self.trust.is_trusted();
        let mut warnings = Vec::new();
        let mut capped: Vec<String> = Vec::new();
        let mut undeclared: Vec<String> = Vec::new();
        let mut unchosen: Vec<String> = Vec::new();
        for m in &mut team.members {
            let from_repo = matches!(m.source, TeamSource::Repo(_));
            let ceiling = if from_repo {
                self.ceiling_for(team.format)
            } else {
                Access::Full
            };
            // A format that declares nothing gets what the user allows its packs.
            let granted = if from_repo && !team.format.declares_access() {
                ceiling
            } else {
                min_access(m.requested_access, ceiling)
            };
            if granted == Access::ReadOnly && m.requested_access == Access::Full {
                capped.push(m.name.clone());
            } else if granted == Access::ReadOnly && from_repo && !team.format.declares_access() {
                undeclared.push(m.name.clone());
            }
            m.access = granted;
            if !from_repo {
                continue;
            }
            if untrusted {
                if m.provider.take().is_some() | m.model.take().is_some() {
                    unchosen.push(m.name.clone());
                }
            } else {
                warnings.extend(self.choice(
                    &format!("member `{}`", m.name),
                    &mut m.provider,
                    &mut m.model,
                ));
            }
            if untrusted && !m.validators.is_empty() {
                warnings.push(format!(
                    "member `{}`: validators ignored (the repository is not trusted)",
                    m.name
                ));
                m.validators.clear();
            }
        }
        if !unchosen.is_empty() {
            warnings.insert(
                0,
                format!(
                    "{}: provider/model ignored (the repository is not trusted; the run's provider is used)",
                    who(&unchosen)
                ),
            );
        }
        if !undeclared.is_empty() {
            warnings.insert(
                0,
                format!(
                    "{}: `read-only` ({} declares no tools, so its members get the ceiling: {})",
                    who(&undeclared),
                    team.format.as_str(),
                    self.why(team.format)
                ),
            );
        }
        if !capped.is_empty() {
            warnings.insert(
                0,
                format!(
                    "{}: access `full` capped at `read-only` ({})",
                    who(&capped),
                    self.why(team.format)
                ),
            );
        }
        if repo_team {
            if let Some(o) = &mut team.orchestrator {
                warnings.extend(self.choice("[orchestrator]", &mut o.provider, &mut o.model));
            }
            if let Some(e) = &mut team.evaluator {
                warnings.extend(self.choice("[evaluator]", &mut e.provider, &mut e.model));
            }
            if untrusted && !team.validators.is_empty() {
                warnings.push("validators ignored (the repository is not trusted)".into());
                team.validators.clear();
            }
        }
        team.warnings.extend(warnings);
    }

    /// Clears a provider/model choice the repository may not make; the warning says so.
    fn choice(
        &self,
        who: &str,
        provider: &mut Option<String>,
        model: &mut Option<String>,
    ) -> Option<String> {
        if !self.trust.is_trusted() {
            let chose = provider.take().is_some() | model.take().is_some();
            return chose.then(|| {
                format!(
                    "{who}: provider/model ignored (the repository is not trusted; the run's provider is used)"
                )
            });
        }
        let p = provider.as_deref()?;
        if self.providers.iter().any(|n| n == p) {
            return None;
        }
        let warning =
            format!("{who}: provider `{p}` is not one of yours; the run's provider is used");
        *provider = None;
        Some(warning)
    }
}
