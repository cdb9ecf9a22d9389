//! The agent tree of a run behind `crewbox tree` and the MCP `tree` tool: built in O(n)
//! from the stored agents and walked without recursion, so a 50,000-deep spawn chain
//! cannot overflow a stack. The terminal renderings (text, Mermaid) live in the binary;
//! the JSON every reader shares is written here.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::store::AgentNode;

/// The agents of one run arranged by parent, children in creation order.
#[derive(Debug, Default)]
pub struct AgentTree {
    agents: Vec<AgentNode>,
    roots: Vec<usize>,
    /// Children of agent `i`: `kids[kid_at[i]..kid_at[i + 1]]` (one allocation for all).
    kid_at: Vec<usize>,
    kids: Vec<usize>,
    parent: Vec<Option<usize>>,
}

/// One agent of the pre-order walk ([`AgentTree::walk`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Visit {
    /// Its index in [`AgentTree::agents`].
    pub node: usize,
    /// 0 for a root.
    pub depth: usize,
    /// The last of its siblings.
    pub last: bool,
}

/// The ids that are some agent's parent, each with its agent once found.
type Index<'a> = HashMap<&'a str, Option<usize>, foldhash::fast::RandomState>;

/// The order agents are arranged in: creation time, then id.
fn key(a: &AgentNode) -> (i64, &str) {
    (a.created_at, a.id.as_str())
}

/// Agent `i`'s parent, if that parent's slot in `index` is filled; `last` is the parent
/// looked up before (siblings follow each other, so most lookups are a comparison).
fn resolve<'a>(
    agents: &'a [AgentNode],
    i: usize,
    index: &Index<'a>,
    last: &mut Option<(&'a str, usize)>,
) -> Option<usize> {
    let p = agents[i].parent.as_ref()?.as_str();
    let found = match *last {
        Some((q, found)) if q == p => Some(found),
        _ => {
            let found = index.get(p).copied().flatten();
            if let Some(f) = found {
                *last = Some((p, f));
            }
            found
        }
    };
    found.filter(|&p| p != i)
}

/// Arranges agents by parent ([`AgentTree::build`]).
fn build(agents: Vec<AgentNode>) -> AgentTree {
    let n = agents.len();
    // Only agents that are some agent's parent are looked up: a table of those ids (far
    // fewer than the agents: an orchestrator's or a planner's children share one) stays
    // in cache while every agent's id is checked against it. Siblings are stored one
    // after another (a team's members, a swarm), so a parent equal to the one before is
    // not hashed again. Ids are crewbox's own; a seeded fast hash. The same pass checks
    // the order: read from the store already sorted, checking is cheaper than sorting.
    let mut index: Index<'_> = HashMap::with_hasher(foldhash::fast::RandomState::default());
    let mut sorted = true;
    let mut before: Option<&str> = None;
    for (i, a) in agents.iter().enumerate() {
        if i > 0 && sorted && key(&agents[i - 1]) > key(a) {
            sorted = false;
        }
        if let Some(p) = a.parent.as_ref().map(|p| p.as_str())
            && before != Some(p)
        {
            index.entry(p).or_insert(None);
            before = Some(p);
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    if !sorted {
        order.sort_by(|&a, &b| key(&agents[a]).cmp(&key(&agents[b])));
    }
    let mut parent: Vec<Option<usize>> = vec![None; n];
    let mut last = None;
    // The earliest agent of an id (in creation order) is the one its children hang
    // under. In creation order a parent's slot is filled before its children look it
    // up, so one pass resolves both; a child ordered before its parent (created in the
    // same millisecond with a smaller id, or corrupt data) is resolved once every slot
    // is filled.
    let mut late = Vec::new();
    for &i in &order {
        if let Some(slot @ None) = index.get_mut(agents[i].id.as_str()) {
            *slot = Some(i);
        }
        if agents[i].parent.is_some() {
            parent[i] = resolve(&agents, i, &index, &mut last);
            if parent[i].is_none() {
                late.push(i);
            }
        }
    }
    for i in late {
        parent[i] = resolve(&agents, i, &index, &mut last);
    }
    drop(index);
    let mut roots: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| parent[i].is_none())
        .collect();
    let (mut kid_at, mut kids) = children(&order, &parent);
    // Agents not reachable from a root sit on a parent cycle. There is none when every
    // parent comes before its child in creation order (the rule for anything crewbox
    // stores): checked in one pass. Otherwise cut each cycle at its earliest agent so
    // every agent is shown exactly once.
    if !parents_come_first(&order, &parent) {
        let mut reached = vec![false; n];
        let mut stack = roots.clone();
        if mark(&kid_at, &kids, &mut reached, &mut stack) < n {
            for &i in &order {
                if reached[i] {
                    continue;
                }
                parent[i] = None;
                roots.push(i);
                stack.push(i);
                mark(&kid_at, &kids, &mut reached, &mut stack);
            }
            (kid_at, kids) = children(&order, &parent);
        }
    }
    AgentTree {
        agents,
        roots,
        kid_at,
        kids,
        parent,
    }
}

/// Every agent's children in creation order, as offsets into one list.
fn children(order: &[usize], parent: &[Option<usize>]) -> (Vec<usize>, Vec<usize>) {
    let n = parent.len();
    let mut kid_at = vec![0usize; n + 1];
    for p in parent.iter().flatten() {
        kid_at[p + 1] += 1;
    }
    for i in 0..n {
        kid_at[i + 1] += kid_at[i];
    }
    let mut next = kid_at.clone();
    let mut kids = vec![0usize; kid_at[n]];
    for &i in order {
        if let Some(p) = parent[i] {
            kids[next[p]] = i;
            next[p] += 1;
        }
    }
    (kid_at, kids)
}

/// Whether every agent's parent comes before it in `order` (then no parent chain can
/// loop).
fn parents_come_first(order: &[usize], parent: &[Option<usize>]) -> bool {
    if order.iter().enumerate().all(|(at, &i)| at == i) {
        return parent
            .iter()
            .enumerate()
            .all(|(i, p)| p.is_none_or(|p| p < i));
    }
    let mut position = vec![0usize; order.len()];
    for (at, &i) in order.iter().enumerate() {
        position[i] = at;
    }
    parent
        .iter()
        .enumerate()
        .all(|(i, p)| p.is_none_or(|p| position[p] < position[i]))
}

/// Marks everything reachable from `stack`; the number newly marked.
fn mark(kid_at: &[usize], kids: &[usize], reached: &mut [bool], stack: &mut Vec<usize>) -> usize {
    let mut count = 0;
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut reached[i], true) {
            continue;
        }
        count += 1;
        stack.extend_from_slice(&kids[kid_at[i]..kid_at[i + 1]]);
    }
    count
}

impl AgentTree {
    /// Arranges agents by parent. Roots are agents without a parent, whose parent is
    /// not among `agents`, or (for corrupt data) the earliest member of a parent cycle.
    pub fn build(agents: Vec<AgentNode>) -> Self {
        build(agents)
    }

    /// Number of agents.
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    /// True for a run without agents.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// The agents, in the order they were given.
    pub fn agents(&self) -> &[AgentNode] {
        &self.agents
    }

    /// The root agents, in creation order.
    pub fn roots(&self) -> impl Iterator<Item = &AgentNode> + '_ {
        self.roots.iter().map(|&i| &self.agents[i])
    }

    /// The children of the agent at `index` in [`agents`](Self::agents), in creation order.
    pub fn children_of(&self, index: usize) -> impl Iterator<Item = &AgentNode> + '_ {
        self.kids_of(index).iter().map(|&i| &self.agents[i])
    }

    /// The index of the parent of the agent at `index`, None for a root.
    pub fn parent_of(&self, index: usize) -> Option<usize> {
        self.parent.get(index).copied().flatten()
    }

    fn kids_of(&self, index: usize) -> &[usize] {
        &self.kids[self.kid_at[index]..self.kid_at[index + 1]]
    }

    /// Calls `f` for every agent in pre-order (roots first, children in creation order).
    pub fn walk(&self, mut f: impl FnMut(Visit)) {
        let mut stack: Vec<Visit> = Vec::with_capacity(self.roots.len());
        push_rev(&mut stack, &self.roots, 0);
        while let Some(v) = stack.pop() {
            f(v);
            push_rev(&mut stack, self.kids_of(v.node), v.depth + 1);
        }
    }

    /// Every agent in pre-order as (index in [`agents`](Self::agents), depth, last of
    /// its siblings): the order every view of the tree shows.
    pub fn preorder(&self) -> Vec<(usize, usize, bool)> {
        let mut out = Vec::with_capacity(self.agents.len());
        self.walk(|v| out.push((v.node, v.depth, v.last)));
        out
    }

    /// Nested JSON `{ id, name, role, state, join, children: [...] }` per root, as text:
    /// written directly because serialising (or dropping) a 50,000-deep
    /// `serde_json::Value` would recurse that deep.
    pub fn to_json(&self, run_id: &str) -> String {
        let mut out = String::with_capacity(self.agents.len() * 160 + 64);
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
                let kids = self.kids_of(*node);
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
        let join = a.join.as_deref();
        out.reserve(
            a.id.as_str().len() + a.name.len() + a.role.len() + join.map_or(4, str::len) + 80,
        );
        out.push_str("{\"id\":\"");
        push_json_inner(out, a.id.as_str());
        out.push_str("\",\"name\":\"");
        push_json_inner(out, &a.name);
        out.push_str("\",\"role\":\"");
        push_json_inner(out, &a.role);
        out.push_str("\",\"state\":\"");
        // A state's name is a plain lowercase word.
        out.push_str(a.state.as_str());
        match join {
            Some(j) => {
                out.push_str("\",\"join\":\"");
                push_json_inner(out, j);
                out.push_str("\",\"children\":[");
            }
            None => out.push_str("\",\"join\":null,\"children\":["),
        }
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

/// Appends `s` as a JSON string, escaped exactly as `serde_json` does (quote,
/// backslash, and control characters below U+0020), without an allocation per string.
fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    push_json_inner(out, s);
    out.push('"');
}

/// Whether any byte of `bytes` is a control character, `"` or `\`. Most names, roles
/// and ids have none: checked eight bytes at a time with word arithmetic, which is as
/// fast in the size-optimised release build (no vector code) as in a speed-optimised one.
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    // A byte of `x` is below 0x20 / zero exactly when this has its high bit set for some
    // byte (the borrow may mark a wrong byte, never a wrong answer to "any").
    let below_space = |x: u64| x.wrapping_sub(ONES * 0x20) & !x & HIGH;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let special = |x: u64| {
        below_space(x) | zero(x ^ (ONES * u64::from(b'"'))) | zero(x ^ (ONES * u64::from(b'\\')))
    };
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        if special(u64::from_le_bytes(w)) != 0 {
            return true;
        }
    }
    words
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// Appends `s` escaped as inside a JSON string (no quotes around it).
fn push_json_inner(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    if !needs_escape(bytes) {
        out.push_str(s);
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        // Every byte escaped is ASCII, so `start..i` falls on character boundaries.
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{AgentId, RunId};
    use crate::vocab::AgentState;
    use crate::vocab::AgentStats;

    /// The word-at-a-time check agrees with the byte-by-byte rule for every byte value
    /// at every position of words, remainders and their mixes, next to any other byte.
    #[test]
    fn the_escape_check_agrees_with_the_rule_for_every_byte() {
        let rule = |b: &[u8]| b.iter().any(|&c| c < 0x20 || c == b'"' || c == b'\\');
        for len in [1, 7, 8, 9, 15, 16, 17, 24] {
            for at in 0..len {
                for other in [b'a', 0x1f, 0x20, 0x21, 0x7f, 0x80, 0xa2, 0xdc, 0xff] {
                    for value in 0..=255u8 {
                        let mut b = vec![other; len];
                        b[at] = value;
                        assert_eq!(needs_escape(&b), rule(&b), "{b:02x?}");
                    }
                }
            }
        }
        assert!(!needs_escape(b""));
    }

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
        let tree = build(vec![
            agent("c2", Some("root"), 30),
            agent("root", None, 10),
            agent("c1", Some("root"), 20),
            agent("g1", Some("c1"), 40),
        ]);
        assert_eq!(ids(tree.roots()), ["root"]);
        assert_eq!(ids(tree.children_of(1)), ["c1", "c2"]);
        assert_eq!(tree.parent_of(3), Some(2));
        assert_eq!(tree.parent_of(1), None);
        assert_eq!(
            tree.preorder(),
            [(1, 0, true), (2, 1, false), (3, 2, true), (0, 1, true)]
        );
    }

    #[test]
    fn a_child_created_in_its_parents_millisecond_with_a_smaller_id_still_hangs_under_it() {
        // Ordered by (time, id), "a" comes before its parent "b".
        let tree = build(vec![agent("b", None, 10), agent("a", Some("b"), 10)]);
        assert_eq!(ids(tree.roots()), ["b"]);
        assert_eq!(tree.parent_of(1), Some(0));
        assert_eq!(ids(tree.children_of(0)), ["a"]);
    }

    #[test]
    fn orphans_and_cycles_become_roots() {
        let tree = build(vec![
            agent("a", None, 1),
            agent("orphan", Some("gone"), 2),
            agent("x", Some("y"), 3),
            agent("y", Some("x"), 4),
            agent("self", Some("self"), 5),
        ]);
        assert_eq!(ids(tree.roots()), ["a", "orphan", "self", "x"]);
        assert_eq!(ids(tree.children_of(2)), ["y"]);
        assert!(ids(tree.children_of(3)).is_empty(), "the cycle is cut at x");
        assert_eq!(tree.preorder().len(), 5);
        let json: serde_json::Value = serde_json::from_str(&tree.to_json("r-1")).unwrap();
        assert_eq!(json["agents"], 5);
        assert_eq!(json["roots"][3]["children"][0]["id"], "y");
    }

    #[test]
    fn deep_chain_walks_without_recursion() {
        const N: usize = 50_000;
        let agents: Vec<_> = (0..N)
            .map(|i| {
                let parent = (i > 0).then(|| format!("a{}", i - 1));
                agent(&format!("a{i}"), parent.as_deref(), i as i64)
            })
            .collect();
        let tree = build(agents);
        assert_eq!(tree.roots().count(), 1);
        let order = tree.preorder();
        assert_eq!(order.len(), N);
        assert_eq!(order[N - 1], (N - 1, N - 1, true));
        let json = tree.to_json("r-1");
        assert_eq!(json.matches("\"children\":[").count(), N);
        assert!(json.ends_with(&format!("{}]}}", "]}".repeat(N))));
    }

    #[test]
    fn json_nests_children_and_escapes_strings() {
        let mut root = agent("root", None, 1);
        root.name = "q\"uote".into();
        let json: serde_json::Value =
            serde_json::from_str(&build(vec![root, agent("kid", Some("root"), 2)]).to_json("r-1"))
                .unwrap();
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
            build(Vec::new()).to_json("r-0"),
            "{\"run_id\":\"r-0\",\"agents\":0,\"roots\":[]}"
        );
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut all: String = (0u8..0x80).map(char::from).collect();
        all.push_str("é ✓ \u{7f} \u{2028} 🦀 \"q\" \\b\\");
        // An escape past the first 16 bytes, and one as the last of 32.
        let late = format!("{}\n{}", "x".repeat(17), "y".repeat(20));
        let last = format!("{}\\", "z".repeat(31));
        for s in [
            all.as_str(),
            late.as_str(),
            last.as_str(),
            "a plain ascii name longer than sixteen bytes",
            "",
            "plain",
            "\u{0}",
            "end\n",
            "\"",
            "ü\u{1b}[31m",
        ] {
            let mut out = String::new();
            push_json_str(&mut out, s);
            assert_eq!(out, serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }
}
