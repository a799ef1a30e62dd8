//! OSV records written as YAML (pypa/advisory-database keeps its `PYSEC-…`
//! records so), read into the same JSON value a `.json` record gives.
//!
//! Scalars are kept as the text the file holds. A YAML 1.2 loader would
//! read the plain scalar `1.10` in `versions: [1.0, 1.10]` as the float
//! 1.1, and a version list would silently name the wrong versions; OSV has
//! no numeric field that matters, so every plain scalar except `null`, `~`,
//! an empty one and the booleans becomes a string. Anchors and aliases are
//! resolved, with a bound on the nodes they expand to (a small hostile file
//! cannot make a billion).

use serde_json::{Map, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Most nodes one record may expand to, aliases included: far above the
/// largest real record (a few thousand), far below what exhausts memory.
const MAX_NODES: usize = 1_000_000;

/// Deepest nesting accepted, as serde_json's own limit for `.json` records.
const MAX_DEPTH: usize = 128;

/// Reads one YAML document into a JSON value. The error says where the
/// text stopped being YAML, or that the document is not a single one.
pub(crate) fn to_json(text: &str) -> Result<Value, String> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    parser.load(&mut builder, true).map_err(|e| format!("not YAML: {e}"))?;
    if let Some(error) = builder.error {
        return Err(error);
    }
    match builder.documents.len() {
        1 => Ok(builder.documents.pop().unwrap_or(Value::Null)),
        0 => Err("an empty YAML document".to_owned()),
        n => Err(format!("{n} YAML documents in one record file")),
    }
}

/// Builds values from parser events.
#[derive(Default)]
struct Builder {
    /// Open sequences and mappings; a mapping holds its pending key.
    stack: Vec<(Node, usize)>,
    /// Values by anchor id.
    anchors: Vec<(usize, Value)>,
    documents: Vec<Value>,
    nodes: usize,
    error: Option<String>,
}

enum Node {
    Sequence(Vec<Value>),
    Mapping(Map<String, Value>, Option<String>),
}

impl Builder {
    /// Counts `added` nodes; false (and the error set) past the bound.
    fn count(&mut self, added: usize) -> bool {
        self.nodes = self.nodes.saturating_add(added);
        if self.nodes > MAX_NODES {
            self.error
                .get_or_insert_with(|| format!("more than {MAX_NODES} nodes once aliases are expanded"));
            return false;
        }
        true
    }

    fn open(&mut self, node: Node, anchor: usize) {
        if self.stack.len() >= MAX_DEPTH {
            self.error = Some(format!("nested deeper than {MAX_DEPTH} levels"));
        } else if self.count(1) {
            self.stack.push((node, anchor));
        }
    }

    fn push_value(&mut self, value: Value, anchor: usize) {
        if anchor > 0 {
            self.anchors.push((anchor, value.clone()));
        }
        match self.stack.last_mut() {
            None => self.documents.push(value),
            Some((Node::Sequence(items), _)) => items.push(value),
            Some((Node::Mapping(map, key), _)) => match key.take() {
                None => *key = Some(key_text(value)),
                Some(key) => {
                    map.insert(key, value);
                }
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, event: Event, _mark: Marker) {
        if self.error.is_some() {
            return;
        }
        match event {
            Event::Scalar(text, style, anchor, _tag) => {
                if self.count(1) {
                    self.push_value(scalar(text, style), anchor);
                }
            }
            Event::SequenceStart(anchor, _) => self.open(Node::Sequence(Vec::new()), anchor),
            Event::MappingStart(anchor, _) => self.open(Node::Mapping(Map::new(), None), anchor),
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((node, anchor)) = self.stack.pop() {
                    let value = match node {
                        Node::Sequence(items) => Value::Array(items),
                        Node::Mapping(map, _) => Value::Object(map),
                    };
                    self.push_value(value, anchor);
                }
            }
            Event::Alias(id) => {
                let Some(index) = self.anchors.iter().rposition(|(anchor, _)| *anchor == id) else {
                    self.error = Some(format!("an alias to unknown anchor #{id}"));
                    return;
                };
                // Counted before it is copied: the copy is what a bomb
                // multiplies.
                if self.count(count_nodes(&self.anchors[index].1)) {
                    let value = self.anchors[index].1.clone();
                    self.push_value(value, 0);
                }
            }
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd => {}
        }
    }
}

/// A scalar's value: quoted and block scalars are strings; plain ones are
/// strings too, except the null and boolean words.
fn scalar(text: String, style: TScalarStyle) -> Value {
    if style != TScalarStyle::Plain {
        return Value::String(text);
    }
    match text.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ => Value::String(text),
    }
}

/// A mapping key as JSON needs it: a string.
fn key_text(key: Value) -> String {
    match key {
        Value::String(text) => text,
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Nodes in a value; recursion is bounded by [`MAX_DEPTH`].
fn count_nodes(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(count_nodes).sum::<usize>(),
        Value::Object(map) => 1 + map.values().map(count_nodes).sum::<usize>(),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_scalars_keep_their_text() {
        let value = to_json(
            "id: PYSEC-0000-1\nmodified: 2021-07-20T19:19:00Z\nversions:\n- 0.1\n- 1.10\n- 2\n- 010\nempty:\nflag: true\nquoted: 'null'\n",
        )
        .expect("yaml");
        assert_eq!(value["versions"], serde_json::json!(["0.1", "1.10", "2", "010"]));
        assert_eq!(value["modified"], "2021-07-20T19:19:00Z");
        assert_eq!(value["empty"], Value::Null);
        assert_eq!(value["flag"], Value::Bool(true));
        assert_eq!(value["quoted"], "null");
    }

    #[test]
    fn aliases_resolve_and_are_bounded() {
        let value = to_json("a: &x [1, 2]\nb: *x\n").expect("yaml");
        assert_eq!(value["b"], serde_json::json!(["1", "2"]));
        // Each level doubles the one before: 2^30 nodes from a few lines.
        let mut bomb = String::from("l0: &l0 [x, x]\n");
        for level in 1..=30 {
            bomb.push_str(&format!("l{level}: &l{level} [*l{p}, *l{p}]\n", p = level - 1));
        }
        let error = to_json(&bomb).expect_err("bounded");
        assert!(error.contains("nodes"), "{error}");
    }

    #[test]
    fn not_yaml_and_several_documents_are_errors() {
        assert!(to_json("a: [1, 2").expect_err("unclosed").starts_with("not YAML"));
        assert!(to_json("a: 1\n---\nb: 2\n").expect_err("two").contains("2 YAML documents"));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(to_json(&deep).expect_err("deep").contains("deeper"));
    }
}
