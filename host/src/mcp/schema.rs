//! A structural check of the input schema a server gives a tool, before a model API
//! sees it. Model APIs validate every tool's schema and refuse the whole request over
//! one bad one, so a single malformed tool of one granted server would fail every model
//! call of the agent. A schema that does not pass is replaced by `{"type": "object"}`
//! with a note naming what is wrong ([`super::tools::offer`]).
//!
//! What is checked: every subschema is an object or a boolean; the keywords that hold
//! schemas hold schemas (maps of them, lists of them); `type` names JSON Schema types;
//! `required` lists strings; `enum` is a list; numeric limits are numbers; `$ref` points
//! at a part of the same schema (a model API fetches nothing). Keywords it does not
//! know are left alone. Pure, and bounded by the schema's size (at most 16 KiB when it
//! is checked) and a nesting limit.

use serde_json::{Map, Value};

/// Nesting of subschemas past which a schema is refused.
pub const MAX_DEPTH: usize = 32;

/// The JSON Schema type names.
const TYPES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// What is wrong with `schema` (the first thing found, with where), or `None`.
pub fn problem(schema: &Value) -> Option<String> {
    check(schema, schema, "#", 0).err()
}

/// `text` as an error quotes it: cut, escaped (a server chose it).
fn shown(text: &str) -> String {
    crate::text::escape(&crate::text::cut_marked(text, 80, "…")).into_owned()
}

fn check(root: &Value, v: &Value, at: &str, depth: usize) -> Result<(), String> {
    let m = match v {
        Value::Bool(_) => return Ok(()),
        Value::Object(m) => m,
        _ => return Err(format!("{} is not a schema", shown(at))),
    };
    if depth > MAX_DEPTH {
        return Err(format!("it nests deeper than {MAX_DEPTH} subschemas"));
    }
    for (key, value) in m {
        let here = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
        keyword(root, key, value, &here, depth)?;
    }
    Ok(())
}

fn keyword(root: &Value, key: &str, value: &Value, at: &str, depth: usize) -> Result<(), String> {
    let wrong = |what: &str| Err(format!("{} {what}", shown(at)));
    match key {
        "type" => {
            let named = |t: &Value| t.as_str().is_some_and(|t| TYPES.contains(&t));
            let ok = match value {
                Value::Array(list) => !list.is_empty() && list.iter().all(named),
                one => named(one),
            };
            if !ok {
                return wrong("names no JSON Schema type");
            }
        }
        "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
            let Some(map) = value.as_object() else {
                return wrong("is not an object of schemas");
            };
            schemas_in(root, map, at, depth)?;
        }
        "required" => {
            let ok = value
                .as_array()
                .is_some_and(|list| list.iter().all(Value::is_string));
            if !ok {
                return wrong("is not a list of property names");
            }
        }
        "items" => match value {
            Value::Array(list) => list_of(root, list, at, depth)?,
            one => check(root, one, at, depth + 1)?,
        },
        "prefixItems" | "allOf" | "anyOf" | "oneOf" => match value.as_array() {
            Some(list) if !list.is_empty() => list_of(root, list, at, depth)?,
            _ => return wrong("is not a non-empty list of schemas"),
        },
        "additionalProperties"
        | "additionalItems"
        | "not"
        | "if"
        | "then"
        | "else"
        | "contains"
        | "propertyNames"
        | "unevaluatedProperties"
        | "unevaluatedItems" => {
            check(root, value, at, depth + 1)?;
        }
        "enum" if !value.is_array() => return wrong("is not a list"),
        "minimum" | "maximum" | "multipleOf" if !value.is_number() => {
            return wrong("is not a number");
        }
        // A number, or (draft 4) a boolean.
        "exclusiveMinimum" | "exclusiveMaximum" if !value.is_number() && !value.is_boolean() => {
            return wrong("is not a number");
        }
        "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties" | "maxProperties"
        | "minContains" | "maxContains"
            if !value.is_u64() =>
        {
            return wrong("is not a count");
        }
        "pattern" if !value.is_string() => return wrong("is not a string"),
        "$ref" => {
            let Some(target) = value.as_str() else {
                return wrong("is not a string");
            };
            let Some(pointer) = target.strip_prefix('#') else {
                return Err(format!(
                    "`$ref` {} at {} points outside the schema",
                    shown(target),
                    shown(at)
                ));
            };
            // `#/$defs/x`, `#` (the root); a plain-name fragment (`#foo`) is no pointer.
            if !(pointer.is_empty() || pointer.starts_with('/')) || root.pointer(pointer).is_none()
            {
                return Err(format!(
                    "`$ref` {} at {} points at nothing in the schema",
                    shown(target),
                    shown(at)
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

fn schemas_in(
    root: &Value,
    map: &Map<String, Value>,
    at: &str,
    depth: usize,
) -> Result<(), String> {
    for (name, sub) in map {
        let here = format!("{at}/{}", name.replace('~', "~0").replace('/', "~1"));
        check(root, sub, &here, depth + 1)?;
    }
    Ok(())
}

fn list_of(root: &Value, list: &[Value], at: &str, depth: usize) -> Result<(), String> {
    for (i, sub) in list.iter().enumerate() {
        check(root, sub, &format!("{at}/{i}"), depth + 1)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_servers_really_send_pass() {
        // What zod-to-json-schema writes (server-everything), with a local `$ref`, a
        // draft-4 boolean exclusiveMinimum and keywords this does not know.
        let good = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "Message to echo", "minLength": 1},
                "count": {"type": ["integer", "null"], "minimum": 0, "exclusiveMinimum": true},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                "node": {"$ref": "#/definitions/node"},
                "mode": {"anyOf": [{"const": "x"}, {"const": "y"}]},
                "extra": true,
                "x-vendor": {"whatever": [1, 2]}
            },
            "definitions": {"node": {"type": "object", "properties": {"next": {"$ref": "#"}}}},
            "required": ["message"],
            "additionalProperties": false
        });
        assert_eq!(problem(&good), None);
    }

    #[test]
    fn a_malformed_schema_is_named_with_where() {
        let cases = [
            (
                json!({"type": "object", "required": 5}),
                "#/required is not a list",
            ),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}),
                "points at nothing",
            ),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "https://x/s.json"}}}),
                "points outside the schema",
            ),
            (
                json!({"type": "object", "properties": {"a": 5}}),
                "#/properties/a is not a schema",
            ),
            (
                json!({"type": "object", "properties": []}),
                "not an object of schemas",
            ),
            (json!({"type": "thing"}), "#/type names no JSON Schema type"),
            (
                json!({"type": "object", "anyOf": []}),
                "not a non-empty list",
            ),
            (
                json!({"type": "object", "properties": {"a": {"maxLength": -1}}}),
                "#/properties/a/maxLength is not a count",
            ),
            (
                json!({"type": "object", "properties": {"a/b": {"items": "x"}}}),
                "#/properties/a~1b/items is not a schema",
            ),
        ];
        for (schema, want) in cases {
            let got = problem(&schema).unwrap_or_default();
            assert!(got.contains(want), "{schema}: {got}");
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let mut deep = json!({"type": "string"});
        for _ in 0..=MAX_DEPTH + 1 {
            deep = json!({"type": "object", "properties": {"a": deep}});
        }
        assert!(problem(&deep).unwrap().contains("deeper"));
    }
}
