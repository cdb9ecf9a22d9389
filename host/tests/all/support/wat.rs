//! Hostile validator components written directly in the component text format, for the
//! attacks a language toolchain would not produce: many core instances with their own
//! memories, answers whose strings all point at one buffer, functions built to be
//! expensive to compile. The component implements `crewbox:plugin/validate@0.1.0` the
//! way `wit-component` lays it out (types imported from `crewbox:plugin/types`, a shim
//! component naming the exported types) and imports nothing else.

use std::fmt::Write;

/// The shape of a generated validator.
#[derive(Clone, Debug, Default)]
pub struct Validator {
    /// Extra core instances, each defining its own memory.
    pub extra_memories: u32,
    /// Initial size of each extra memory, in 64 KiB pages.
    pub pages_each: u32,
    /// Results in the verdict; every detail points at the same buffer.
    pub results: u32,
    /// Size of that shared detail buffer, in bytes (filled with `x`).
    pub detail_bytes: u32,
    /// The detail's text instead of `x`s, when set (any bytes: escapes, newlines…).
    pub detail: Option<String>,
    /// The verdict's `passed` flag.
    pub passed: bool,
    /// Each result's `passed` flag.
    pub results_pass: bool,
    /// `validate` spins until the deadline instead of answering.
    pub spin: bool,
    /// Functions of nested blocks in an extra module (costly to compile).
    pub nested_functions: u32,
    /// Nesting depth of each of them.
    pub nesting: u32,
    /// How many such nests follow one another in each function (at least one).
    pub nests: u32,
    /// Functions of straight-line code in an extra module (costly in memory).
    pub flat_functions: u32,
    /// `local.get`/`local.set` pairs in each of them, over this many locals.
    pub flat_ops: u32,
    /// Extra component imports, as text (e.g. an interface with a wrong signature).
    pub imports: Vec<String>,
}

/// Where the main module keeps things (all below the shared detail buffer).
const INFO: u32 = 16;
const VERDICT: u32 = 64;
const NAME: u32 = 256;
const CRITERION: u32 = 1024;
const DETAIL: u32 = 65536;

impl Validator {
    /// The component's binary.
    pub fn component(&self) -> Vec<u8> {
        wat::parse_str(self.text()).expect("generated component text parses")
    }

    /// The component's text.
    pub fn text(&self) -> String {
        let detail_bytes = self
            .detail
            .as_ref()
            .map_or(self.detail_bytes, |d| d.len() as u32);
        let results_at = (DETAIL + detail_bytes + 7) & !7;
        let heap = (results_at + self.results * 20 + 7) & !7;
        let pages = heap / 65536 + 16;
        let mut t = String::new();
        t.push_str(COMPONENT_HEAD);
        for import in &self.imports {
            let _ = writeln!(t, "  {import}");
        }
        let _ = write!(
            t,
            r#"
  (core module $main
    (memory (export "memory") {pages})
    (global $bump (mut i32) (i32.const {heap}))
    (data (i32.const {NAME}) "wat-validator")
    (data (i32.const {DETAIL}) "{detail_data}")
    (func (export "cabi_realloc") (param $old i32) (param $old_size i32) (param $align i32) (param $size i32) (result i32)
      (local $ptr i32)
      (local.set $ptr (i32.and (i32.add (global.get $bump) (i32.sub (local.get $align) (i32.const 1)))
                               (i32.sub (i32.const 0) (local.get $align))))
      (global.set $bump (i32.add (local.get $ptr) (local.get $size)))
      (block $fits
        (br_if $fits (i32.le_u (global.get $bump) (i32.mul (memory.size) (i32.const 65536))))
        (drop (memory.grow (i32.add (i32.const 1)
          (i32.div_u (i32.sub (global.get $bump) (i32.mul (memory.size) (i32.const 65536))) (i32.const 65536))))))
      (if (local.get $old) (then (memory.copy (local.get $ptr) (local.get $old) (local.get $old_size))))
      (local.get $ptr))
    (func (export "describe") (result i32)
      (i32.store (i32.const {INFO}) (i32.const {NAME}))
      (i32.store (i32.const {info_len}) (i32.const 13))
      (i32.store (i32.const {info_desc}) (i32.const {NAME}))
      (i32.store (i32.const {info_desc_len}) (i32.const 13))
      (i32.store (i32.const {info_list}) (i32.const 0))
      (i32.store (i32.const {info_list_len}) (i32.const 0))
      (i32.const {INFO}))
    (func (export "validate") (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
      (local $i i32) (local $at i32)
      {spin}
      {fill}
      (i32.store8 (i32.const {CRITERION}) (i32.const 99))
      (block $done
        (loop $each
          (br_if $done (i32.ge_u (local.get $i) (i32.const {results})))
          (local.set $at (i32.add (i32.const {results_at}) (i32.mul (local.get $i) (i32.const 20))))
          (i32.store (local.get $at) (i32.const {CRITERION}))
          (i32.store offset=4 (local.get $at) (i32.const 1))
          (i32.store8 offset=8 (local.get $at) (i32.const {results_pass}))
          (i32.store offset=12 (local.get $at) (i32.const {DETAIL}))
          (i32.store offset=16 (local.get $at) (i32.const {detail_bytes}))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $each)))
      (i32.store8 (i32.const {VERDICT}) (i32.const 0))
      (i32.store8 (i32.const {v_passed}) (i32.const {passed}))
      (i32.store (i32.const {v_results}) (i32.const {results_at}))
      (i32.store (i32.const {v_len}) (i32.const {results}))
      (i32.store8 (i32.const {v_fix}) (i32.const 0))
      (i32.const {VERDICT})))
  (core instance $m (instantiate $main))
"#,
            detail_data = self
                .detail
                .as_deref()
                .unwrap_or("")
                .bytes()
                .map(|b| format!("\\{b:02x}"))
                .collect::<String>(),
            info_len = INFO + 4,
            info_desc = INFO + 8,
            info_desc_len = INFO + 12,
            info_list = INFO + 16,
            info_list_len = INFO + 20,
            spin = if self.spin {
                "(loop $forever (br $forever))"
            } else {
                ""
            },
            fill = match &self.detail {
                Some(_) => String::new(),
                None => format!(
                    "(memory.fill (i32.const {DETAIL}) (i32.const 120) (i32.const {detail_bytes}))"
                ),
            },
            results = self.results,
            results_pass = u8::from(self.results_pass),
            passed = u8::from(self.passed),
            v_passed = VERDICT + 4,
            v_results = VERDICT + 8,
            v_len = VERDICT + 12,
            v_fix = VERDICT + 16,
        );
        if self.extra_memories > 0 {
            let _ = writeln!(t, "  (core module $extra (memory {}))", self.pages_each);
            for _ in 0..self.extra_memories {
                t.push_str("  (core instance (instantiate $extra))\n");
            }
        }
        if self.nested_functions > 0 {
            t.push_str("  (core module $heavy\n");
            let nest = format!(
                "{}{}",
                " block".repeat(self.nesting as usize),
                " end".repeat(self.nesting as usize)
            );
            let body = format!("    (func{})\n", nest.repeat(self.nests.max(1) as usize));
            for _ in 0..self.nested_functions {
                t.push_str(&body);
            }
            t.push_str("  )\n  (core instance (instantiate $heavy))\n");
        }
        if self.flat_functions > 0 {
            let locals = 1000;
            let mut body = format!("    (func (local{})", " i64".repeat(locals));
            for i in 0..self.flat_ops as usize {
                let _ = write!(
                    body,
                    " local.get {} local.set {}",
                    i % locals,
                    (i * 7 + 1) % locals
                );
            }
            body.push_str(")\n");
            t.push_str("  (core module $flat\n");
            for _ in 0..self.flat_functions {
                t.push_str(&body);
            }
            t.push_str("  )\n  (core instance (instantiate $flat))\n");
        }
        t.push_str(COMPONENT_TAIL);
        t
    }
}

const COMPONENT_HEAD: &str = r#"(component
  (type $types-ty (instance
    (type (enum "completed" "steered" "stopped" "error"))
    (export "agent-status" (type (eq 0)))
    (type (record (field "agent-id" string) (field "role" string) (field "task" string) (field "status" 1) (field "reply" string)))
    (export "agent-output" (type (eq 2)))
    (type (record (field "criterion" string) (field "passed" bool) (field "detail" string)))
    (export "criterion-result" (type (eq 4)))
    (type (list 5))
    (type (option string))
    (type (record (field "passed" bool) (field "results" 6) (field "fix-prompt" 7)))
    (export "verdict" (type (eq 8)))
    (type (list string))
    (type (record (field "name" string) (field "description" string) (field "default-criteria" 10)))
    (export "validator-info" (type (eq 11)))))
  (import "crewbox:plugin/types@0.1.0" (instance $types (type $types-ty)))
  (alias export $types "agent-status" (type $agent-status))
  (alias export $types "agent-output" (type $agent-output))
  (alias export $types "criterion-result" (type $criterion-result))
  (alias export $types "verdict" (type $verdict))
  (alias export $types "validator-info" (type $validator-info))
"#;

const COMPONENT_TAIL: &str = r#"
  (alias core export $m "memory" (core memory $memory))
  (alias core export $m "cabi_realloc" (core func $realloc))
  (type $describe-ty (func (result $validator-info)))
  (func $describe (type $describe-ty)
    (canon lift (core func $m "describe") (memory $memory) string-encoding=utf8))
  (type $criteria (list string))
  (type $answer (result $verdict (error string)))
  (type $validate-ty (func (param "output" $agent-output) (param "criteria" $criteria) (result $answer)))
  (func $validate (type $validate-ty)
    (canon lift (core func $m "validate") (memory $memory) (realloc $realloc) string-encoding=utf8))
  (component $shim
    (type $status (enum "completed" "steered" "stopped" "error"))
    (import "import-type-agent-status" (type $status-in (eq $status)))
    (type $ao (record (field "agent-id" string) (field "role" string) (field "task" string) (field "status" $status-in) (field "reply" string)))
    (import "import-type-agent-output" (type $ao-in (eq $ao)))
    (type $cr (record (field "criterion" string) (field "passed" bool) (field "detail" string)))
    (import "import-type-criterion-result" (type $cr-in (eq $cr)))
    (type $crs (list $cr-in))
    (type $fix (option string))
    (type $v (record (field "passed" bool) (field "results" $crs) (field "fix-prompt" $fix)))
    (import "import-type-verdict" (type $v-in (eq $v)))
    (type $strings (list string))
    (type $vi (record (field "name" string) (field "description" string) (field "default-criteria" $strings)))
    (import "import-type-validator-info" (type $vi-in (eq $vi)))
    (type $d-in-ty (func (result $vi-in)))
    (import "import-func-describe" (func $d-in (type $d-in-ty)))
    (type $r-in (result $v-in (error string)))
    (type $val-in-ty (func (param "output" $ao-in) (param "criteria" $strings) (result $r-in)))
    (import "import-func-validate" (func $val-in (type $val-in-ty)))
    (export $ao-out "agent-output" (type $ao-in))
    (export $v-out "verdict" (type $v-in))
    (export $vi-out "validator-info" (type $vi-in))
    (type $d-out-ty (func (result $vi-out)))
    (export "describe" (func $d-in) (func (type $d-out-ty)))
    (type $r-out (result $v-out (error string)))
    (type $val-out-ty (func (param "output" $ao-out) (param "criteria" $strings) (result $r-out)))
    (export "validate" (func $val-in) (func (type $val-out-ty))))
  (instance $shim-instance (instantiate $shim
    (with "import-func-describe" (func $describe))
    (with "import-func-validate" (func $validate))
    (with "import-type-agent-status" (type $agent-status))
    (with "import-type-agent-output" (type $agent-output))
    (with "import-type-criterion-result" (type $criterion-result))
    (with "import-type-verdict" (type $verdict))
    (with "import-type-validator-info" (type $validator-info))))
  (export "crewbox:plugin/validate@0.1.0" (instance $shim-instance)))
"#;
