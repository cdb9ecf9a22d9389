//! The terminal renderings of a run's agent tree (`crewbox tree`): indented text under
//! box-drawing branches, and a Mermaid flowchart. Written without recursion, so a
//! 50,000-deep spawn chain cannot overflow a stack. Only `crewbox::` paths are used
//! here: the `orchestration` bench includes this file to time what the command does.

use std::collections::HashMap;
use std::fmt::Write as _;

use crewbox::text::escape;
use crewbox::types::AgentTree;

/// Below this depth text lines stop indenting (and say their depth instead); otherwise
/// a deep chain would print quadratically many spaces.
pub const MAX_TEXT_INDENT: usize = 64;

/// One line per agent, `name (role) state id`, under box-drawing branches.
pub fn text(tree: &AgentTree) -> String {
    let agents = tree.agents();
    let mut out = String::with_capacity(agents.len() * 64);
    // The indentation of the current line's parent; truncated when the walk moves
    // back up, because deeper lines only ever append to it.
    let mut prefix = String::new();
    let mut prefix_at: Vec<usize> = vec![0];
    tree.walk(|v| {
        let shown = v.depth.min(MAX_TEXT_INDENT);
        prefix.truncate(prefix_at[shown]);
        out.push_str(&prefix);
        if v.depth > 0 {
            out.push_str(if v.last { "└─ " } else { "├─ " });
        }
        if v.depth > MAX_TEXT_INDENT {
            let _ = write!(out, "[depth {}] ", v.depth);
        }
        let a = &agents[v.node];
        // Names and roles come from models (`spawn_agent`), team files and workers.
        for part in [
            &*escape(&a.name),
            " (",
            &*escape(&a.role),
            ") ",
            a.state.as_str(),
            " ",
            &*escape(a.id.as_str()),
            "\n",
        ] {
            out.push_str(part);
        }
        if v.depth < MAX_TEXT_INDENT {
            if v.depth > 0 {
                prefix.push_str(if v.last { "   " } else { "│  " });
            }
            prefix_at.truncate(shown + 1);
            prefix_at.push(prefix.len());
        }
    });
    out
}

/// A Mermaid `flowchart TD`: spawn edges solid, group and swarm membership dashed
/// to one node per join.
pub fn mermaid(tree: &AgentTree) -> String {
    let agents = tree.agents();
    let mut out = String::with_capacity(agents.len() * 96);
    out.push_str("flowchart TD\n");
    let mut joins: HashMap<&str, usize> = HashMap::new();
    let mut join_order: Vec<&str> = Vec::new();
    tree.walk(|v| {
        let a = &agents[v.node];
        let _ = writeln!(
            out,
            "  a{}[\"{} ({})<br/>{} · {}\"]",
            v.node,
            mermaid_escape(&a.name),
            mermaid_escape(&a.role),
            a.state.as_str(),
            mermaid_escape(a.id.as_str())
        );
        if let Some(join) = a.join.as_deref() {
            joins.entry(join).or_insert_with(|| {
                join_order.push(join);
                join_order.len() - 1
            });
        }
    });
    for (j, join) in join_order.iter().enumerate() {
        let _ = writeln!(out, "  j{j}{{{{\"{}\"}}}}", mermaid_escape(join));
    }
    tree.walk(|v| {
        if let Some(p) = tree.parent_of(v.node) {
            let _ = writeln!(out, "  a{p} --> a{}", v.node);
        }
        if let Some(j) = agents[v.node].join.as_deref().map(|j| joins[j]) {
            let _ = writeln!(out, "  j{j} -.- a{}", v.node);
        }
    });
    out
}

/// Escapes text for a quoted Mermaid label: quotes and markup become entity codes,
/// line breaks become spaces, terminal controls visible escapes.
pub fn mermaid_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in escape(&s.replace(['\n', '\r'], " ")).chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '#' => out.push_str("#35;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '&' => out.push_str("#amp;"),
            '`' => out.push_str("#96;"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crewbox::types::{AgentNode, AgentState};

    fn agent(id: &str, parent: Option<&str>, at: i64) -> AgentNode {
        AgentNode {
            id: crewbox::AgentId::from_string(id),
            parent: parent.map(crewbox::AgentId::from_string),
            name: format!("n-{id}"),
            role: "worker".into(),
            state: AgentState::Completed,
            join: None,
            created_at: at,
        }
    }

    fn build(agents: &[AgentNode]) -> AgentTree {
        AgentTree::build(agents.to_vec())
    }

    #[test]
    fn children_follow_creation_order_not_input_order() {
        let agents = vec![
            agent("c2", Some("root"), 30),
            agent("root", None, 10),
            agent("c1", Some("root"), 20),
            agent("g1", Some("c1"), 40),
        ];
        assert_eq!(
            text(&build(&agents)),
            "n-root (worker) completed root\n\
             ├─ n-c1 (worker) completed c1\n\
             │  └─ n-g1 (worker) completed g1\n\
             └─ n-c2 (worker) completed c2\n"
        );
    }

    #[test]
    fn orphans_and_cycles_are_each_shown_once() {
        let agents = vec![
            agent("a", None, 1),
            agent("orphan", Some("gone"), 2),
            agent("x", Some("y"), 3),
            agent("y", Some("x"), 4),
            agent("self", Some("self"), 5),
        ];
        let out = text(&build(&agents));
        assert_eq!(out.lines().count(), 5);
        assert!(
            out.ends_with("n-x (worker) completed x\n└─ n-y (worker) completed y\n"),
            "{out}"
        );
    }

    #[test]
    fn deep_chain_renders_without_recursion() {
        const N: usize = 50_000;
        let agents: Vec<_> = (0..N)
            .map(|i| {
                let parent = (i > 0).then(|| format!("a{}", i - 1));
                agent(&format!("a{i}"), parent.as_deref(), i as i64)
            })
            .collect();
        let tree = build(&agents);
        let out = text(&tree);
        assert_eq!(out.lines().count(), N);
        // Indentation stops growing, so the output stays linear in size.
        let last = out.lines().last().unwrap();
        assert!(last.starts_with(&" ".repeat(3 * (MAX_TEXT_INDENT - 1))));
        assert!(last.contains(&format!("[depth {}] n-a{}", N - 1, N - 1)));
        assert!(out.len() < N * 300);
        assert_eq!(mermaid(&tree).matches(" --> ").count(), N - 1);
    }

    #[test]
    fn mermaid_escapes_labels_and_dashes_swarm_members() {
        let mut lead = agent("lead", None, 1);
        lead.name = "say \"hi\" <b>#1</b>\nnext".into();
        let mut m1 = agent("m1", Some("lead"), 2);
        m1.join = Some("swarm:r-9".into());
        let mut m2 = agent("m2", Some("lead"), 3);
        m2.join = Some("swarm:r-9".into());
        let out = mermaid(&build(&[lead, m1, m2]));
        assert!(out.starts_with("flowchart TD\n"), "{out}");
        assert!(
            out.contains("a0[\"say #quot;hi#quot; #lt;b#gt;#35;1#lt;/b#gt; next (worker)<br/>completed · lead\"]"),
            "{out}"
        );
        assert_eq!(out.matches("j0{{\"swarm:r-9\"}}").count(), 1, "{out}");
        assert!(out.contains("  a0 --> a1\n") && out.contains("  a0 --> a2\n"));
        assert!(out.contains("  j0 -.- a1\n") && out.contains("  j0 -.- a2\n"));
        assert!(!out.contains("-.- a0"));
        // No raw quote left inside any label.
        for line in out.lines().filter(|l| l.contains("[\"")) {
            let inner = &line[line.find("[\"").unwrap() + 2..line.rfind("\"]").unwrap()];
            assert!(!inner.contains('"'), "{line}");
        }
    }
}
