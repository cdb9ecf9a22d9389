//! The agent tree of a run behind `crewbox tree`: built in O(n) from the stored agents
//! and rendered without recursion, so a 50,000-deep spawn chain cannot overflow a stack.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::store::AgentNode;

/// Below this depth text lines stop indenting (and say their depth instead); otherwise
/// a deep chain would print quadratically many spaces.
pub const MAX_TEXT_INDENT: usize = 64;

/// The agents of one run arranged by parent, children in creation order.
#[derive(Debug)]
pub struct AgentTree<'a> {
    agents: &'a [AgentNode],
    roots: Vec<usize>,
    children: Vec<Vec<usize>>,
    parent: Vec<Option<usize>>,
}

/// Arranges agents by parent. Roots are agents without a parent, whose parent is not
/// among `agents`, or (for corrupt data) the earliest member of a parent cycle.
pub fn build(agents: &[AgentNode]) -> AgentTree<'_> {
    let n = agents.len();
    let mut order: Vec<usize> = (0..n).collect();
    // Already sorted when read from the store, which makes this stable sort linear.
    order.sort_by(|&a, &b| {
        (agents[a].created_at, &agents[a].id).cmp(&(agents[b].created_at, &agents[b].id))
    });
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(n);
    for &i in &order {
        index.entry(agents[i].id.as_str()).or_insert(i);
    }
    let mut tree = AgentTree {
        agents,
        roots: Vec::new(),
        children: vec![Vec::new(); n],
        parent: vec![None; n],
    };
    for &i in &order {
        let parent = agents[i]
            .parent
            .as_ref()
            .and_then(|p| index.get(p.as_str()).copied())
            .filter(|&p| p != i);
        match parent {
            Some(p) => {
                tree.children[p].push(i);
                tree.parent[i] = Some(p);
            }
            None => tree.roots.push(i),
        }
    }
    // Agents not reachable from a root sit on a parent cycle: cut each cycle at its
    // earliest agent so every agent is shown exactly once.
    let mut reached = vec![false; n];
    let mut stack = tree.roots.clone();
    if tree.mark(&mut reached, &mut stack) < n {
        for &i in &order {
            if reached[i] {
                continue;
            }
            if let Some(p) = tree.parent[i].take() {
                tree.children[p].retain(|&c| c != i);
            }
            tree.roots.push(i);
            stack.push(i);
            tree.mark(&mut reached, &mut stack);
        }
    }
    tree
}

/// One line of the pre-order walk.
struct Visit {
    node: usize,
    depth: usize,
    last: bool,
}

impl<'a> AgentTree<'a> {
    fn mark(&self, reached: &mut [bool], stack: &mut Vec<usize>) -> usize {
        let mut count = 0;
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut reached[i], true) {
                continue;
            }
            count += 1;
            stack.extend(self.children[i].iter().copied());
        }
        count
    }

    /// Number of agents.
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    /// True for a run without agents.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// The root agents, in creation order.
    pub fn roots(&self) -> impl Iterator<Item = &'a AgentNode> + '_ {
        self.roots.iter().map(|&i| &self.agents[i])
    }

    /// The children of the agent at `index` in the input slice, in creation order.
    pub fn children_of(&self, index: usize) -> impl Iterator<Item = &'a AgentNode> + '_ {
        self.children[index].iter().map(|&i| &self.agents[i])
    }

    /// Calls `f` for every agent in pre-order (roots first, children in creation order).
    fn walk(&self, mut f: impl FnMut(&Visit)) {
        let mut stack: Vec<Visit> = Vec::with_capacity(self.roots.len());
        push_rev(&mut stack, &self.roots, 0);
        while let Some(v) = stack.pop() {
            f(&v);
            push_rev(&mut stack, &self.children[v.node], v.depth + 1);
        }
    }

    /// Every agent in pre-order as (index in the input slice, depth, last of its
    /// siblings): the order every view of the tree shows.
    pub fn preorder(&self) -> Vec<(usize, usize, bool)> {
        let mut out = Vec::with_capacity(self.agents.len());
        self.walk(|v| out.push((v.node, v.depth, v.last)));
        out
    }

    /// One line per agent, `name (role) state id`, under box-drawing branches.
    pub fn render_text(&self) -> String {
        let mut out = String::with_capacity(self.agents.len() * 64);
        // The indentation of the current line's parent; truncated when the walk moves
        // back up, because deeper lines only ever append to it.
        let mut prefix = String::new();
        let mut prefix_at: Vec<usize> = vec![0];
        self.walk(|v| {
            let shown = v.depth.min(MAX_TEXT_INDENT);
            prefix.truncate(prefix_at[shown]);
            out.push_str(&prefix);
            if v.depth > 0 {
                out.push_str(if v.last { "└─ " } else { "├─ " });
            }
            if v.depth > MAX_TEXT_INDENT {
                let _ = write!(out, "[depth {}] ", v.depth);
            }
            let a = &self.agents[v.node];
            // Names and roles come from models (`spawn_agent`), team files and workers.
            for part in [
                &*crate::text::escape(&a.name),
                " (",
                &*crate::text::escape(&a.role),
                ") ",
                a.state.as_str(),
                " ",
                &*crate::text::escape(a.id.as_str()),
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
    pub fn render_mermaid(&self) -> String {
        let mut out = String::with_capacity(self.agents.len() * 96);
        out.push_str("flowchart TD\n");
        let mut joins: HashMap<&str, usize> = HashMap::new();
        let mut join_order: Vec<&str> = Vec::new();
        self.walk(|v| {
            let a = &self.agents[v.node];
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
        self.walk(|v| {
            if let Some(p) = self.parent[v.node] {
                let _ = writeln!(out, "  a{p} --> a{}", v.node);
            }
            if let Some(j) = self.agents[v.node].join.as_deref().map(|j| joins[j]) {
                let _ = writeln!(out, "  j{j} -.- a{}", v.node);
            }
        });
        out
    }

    /// Nested JSON `{ id, name, role, state, join, children: [...] }` per root, as text:
    /// written directly because serialising (or dropping) a 50,000-deep
    /// `serde_json::Value` would recurse that deep.
    pub fn render_json(&self, run_id: &str) -> String {
        let mut out = String::with_capacity(self.agents.len() * 128);
        out.push_str("{\"run_id\":");
        push_json_str(&mut out, run_id);
        let _ = write!(out, ",\"agents\":{},\"roots\":[", self.agents.len());
        // Each frame: a node whose children are being written, and the next child.
        let mut stack: Vec<(usize, usize)> = Vec::new();
        for (r, &root) in self.roots.iter().enumerate() {
            if r > 0 {
                out.push(',');
            }
            self.open_json(&mut out, root);
            stack.push((root, 0));
            while let Some((node, next)) = stack.last_mut() {
                let kids = &self.children[*node];
                if *next == kids.len() {
                    out.push_str("]}");
                    stack.pop();
                    continue;
                }
                if *next > 0 {
                    out.push(',');
                }
                let child = kids[*next];
                *next += 1;
                self.open_json(&mut out, child);
                stack.push((child, 0));
            }
        }
        out.push_str("]}");
        out
    }

    fn open_json(&self, out: &mut String, node: usize) {
        let a = &self.agents[node];
        out.push_str("{\"id\":");
        push_json_str(out, a.id.as_str());
        out.push_str(",\"name\":");
        push_json_str(out, &a.name);
        out.push_str(",\"role\":");
        push_json_str(out, &a.role);
        out.push_str(",\"state\":");
        push_json_str(out, a.state.as_str());
        out.push_str(",\"join\":");
        match &a.join {
            Some(j) => push_json_str(out, j),
            None => out.push_str("null"),
        }
        out.push_str(",\"children\":[");
    }
}

fn push_rev(stack: &mut Vec<Visit>, nodes: &[usize], depth: usize) {
    let last = nodes.len().saturating_sub(1);
    for (k, &node) in nodes.iter().enumerate().rev() {
        stack.push(Visit {
            node,
            depth,
            last: k == last,
        });
    }
}

fn push_json_str(out: &mut String, s: &str) {
    // Serialising a &str cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

/// Escapes text for a quoted Mermaid label: quotes and markup become entity codes,
/// line breaks become spaces, terminal controls visible escapes.
pub fn mermaid_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in crate::text::escape(&s.replace(['\n', '\r'], " ")).chars() {
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
    use crate::ids::{AgentId, RunId};
    use crate::vocab::AgentState;
    use crate::vocab::AgentStats;

    fn agent(id: &str, parent: Option<&str>, at: i64) -> AgentNode {
        crate::store::AgentRecord {
            id: AgentId::from_string(id),
            run_id: RunId::from_string("r-1"),
            parent: parent.map(AgentId::from_string),
            name: format!("n-{id}"),
            role: "worker".into(),
            task: "t".into(),
            caps: Vec::new(),
            depth: 0,
            join: None,
            state: AgentState::Completed,
            stats: AgentStats::default(),
            result: None,
            error: None,
            created_at: at,
            started_at: None,
            finished_at: None,
        }
        .into()
    }

    fn ids<'a>(it: impl Iterator<Item = &'a AgentNode>) -> Vec<&'a str> {
        it.map(|a| a.id.as_str()).collect()
    }

    #[test]
    fn children_follow_creation_order_not_input_order() {
        let agents = vec![
            agent("c2", Some("root"), 30),
            agent("root", None, 10),
            agent("c1", Some("root"), 20),
            agent("g1", Some("c1"), 40),
        ];
        let tree = build(&agents);
        assert_eq!(ids(tree.roots()), ["root"]);
        assert_eq!(ids(tree.children_of(1)), ["c1", "c2"]);
        assert_eq!(
            tree.render_text(),
            "n-root (worker) completed root\n\
             ├─ n-c1 (worker) completed c1\n\
             │  └─ n-g1 (worker) completed g1\n\
             └─ n-c2 (worker) completed c2\n"
        );
    }

    #[test]
    fn orphans_and_cycles_become_roots() {
        let agents = vec![
            agent("a", None, 1),
            agent("orphan", Some("gone"), 2),
            agent("x", Some("y"), 3),
            agent("y", Some("x"), 4),
            agent("self", Some("self"), 5),
        ];
        let tree = build(&agents);
        assert_eq!(ids(tree.roots()), ["a", "orphan", "self", "x"]);
        assert_eq!(ids(tree.children_of(2)), ["y"]);
        assert_eq!(tree.render_text().lines().count(), 5);
        let json: serde_json::Value = serde_json::from_str(&tree.render_json("r-1")).unwrap();
        assert_eq!(json["agents"], 5);
        assert_eq!(json["roots"][3]["children"][0]["id"], "y");
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
        assert_eq!(tree.roots().count(), 1);
        let text = tree.render_text();
        assert_eq!(text.lines().count(), N);
        // Indentation stops growing, so the output stays linear in size.
        let last = text.lines().last().unwrap();
        assert!(last.starts_with(&" ".repeat(3 * (MAX_TEXT_INDENT - 1))));
        assert!(last.contains(&format!("[depth {}] n-a{}", N - 1, N - 1)));
        assert!(text.len() < N * 300);
        let json = tree.render_json("r-1");
        assert_eq!(json.matches("\"children\":[").count(), N);
        assert!(json.ends_with(&format!("{}]}}", "]}".repeat(N))));
        let mermaid = tree.render_mermaid();
        assert_eq!(mermaid.matches(" --> ").count(), N - 1);
    }

    #[test]
    fn mermaid_escapes_labels_and_dashes_swarm_members() {
        let mut lead = agent("lead", None, 1);
        lead.name = "say \"hi\" <b>#1</b>\nnext".into();
        let mut m1 = agent("m1", Some("lead"), 2);
        m1.join = Some("swarm:r-9".into());
        let mut m2 = agent("m2", Some("lead"), 3);
        m2.join = Some("swarm:r-9".into());
        let agents = vec![lead, m1, m2];
        let out = build(&agents).render_mermaid();
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

    #[test]
    fn json_nests_children_and_escapes_strings() {
        let mut root = agent("root", None, 1);
        root.name = "q\"uote".into();
        let agents = vec![root, agent("kid", Some("root"), 2)];
        let json: serde_json::Value =
            serde_json::from_str(&build(&agents).render_json("r-1")).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "run_id": "r-1",
                "agents": 2,
                "roots": [{
                    "id": "root", "name": "q\"uote", "role": "worker", "state": "completed",
                    "join": null,
                    "children": [{
                        "id": "kid", "name": "n-kid", "role": "worker", "state": "completed",
                        "join": null, "children": [],
                    }],
                }],
            })
        );
        assert_eq!(
            build(&[]).render_json("r-0"),
            "{\"run_id\":\"r-0\",\"agents\":0,\"roots\":[]}"
        );
    }
}
