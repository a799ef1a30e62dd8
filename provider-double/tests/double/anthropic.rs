//! Anthropic Messages: the documented shape round trip, and every request
//! check firing.

use patchpilot_provider_double::{Message, ProviderDouble, Scripted, ToolCall, Turn, Usage, Wire};
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_two_turn_tool_conversation_round_trips_in_the_documented_shape() {
    let double = ProviderDouble::start(Scripted::new(vec![
        Turn::Reply {
            text: Some("Reading the Dockerfile.".into()),
            tool_calls: vec![("read_file".into(), json!({"path": "Dockerfile"}))],
            usage: None,
        },
        Turn::text("The base image is pinned."),
    ]))
    .await
    .expect("start");

    let first = anthropic_body();
    let sent = post_wire(&double, Wire::Anthropic, &first).await;
    assert_eq!(sent.status, 200);
    assert!(sent.header("content-type").is_some_and(|t| t.starts_with("application/json")));
    let body = &sent.body;
    assert_eq!(
        keys(body),
        set(&["id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"])
    );
    assert_id(&body["id"], "msg_");
    assert_eq!(body["type"], "message");
    assert_eq!(body["role"], "assistant");
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["stop_reason"], "tool_use");
    assert!(body["stop_sequence"].is_null());
    let content = body["content"].as_array().expect("content");
    assert_eq!(content.len(), 2);
    assert_eq!(content[0], json!({"type": "text", "text": "Reading the Dockerfile."}));
    assert_eq!(keys(&content[1]), set(&["type", "id", "name", "input"]));
    assert_eq!(content[1]["type"], "tool_use");
    let id = assert_id(&content[1]["id"], "toolu_");
    assert_eq!(content[1]["name"], "read_file");
    assert_eq!(content[1]["input"], json!({"path": "Dockerfile"}));
    assert_eq!(keys(&body["usage"]), set(&["input_tokens", "output_tokens"]));
    let input = body["usage"]["input_tokens"].as_u64().expect("n");
    let output = body["usage"]["output_tokens"].as_u64().expect("n");
    assert_eq!(input, first.to_string().len().div_ceil(4) as u64);
    assert!(output >= 1);

    let mut second = first.clone();
    second["messages"].as_array_mut().expect("messages").extend([
        json!({"role": "assistant", "content": body["content"]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": [{"type": "text", "text": "FROM alpine:3.20"}]},
            {"type": "text", "text": "Is it pinned?"},
        ]}),
    ]);
    let sent = post_wire(&double, Wire::Anthropic, &second).await;
    assert_eq!(sent.status, 200);
    assert_eq!(sent.body["stop_reason"], "end_turn");
    assert_eq!(sent.body["content"], json!([{"type": "text", "text": "The base image is pinned."}]));

    assert!(double.violations().is_empty(), "{:#?}", double.violations());
    assert_eq!(double.calls(), 2);
    let second_usage = &sent.body["usage"];
    assert_eq!(
        double.usage(),
        Usage {
            input_tokens: input + second_usage["input_tokens"].as_u64().expect("n"),
            output_tokens: output + second_usage["output_tokens"].as_u64().expect("n"),
        }
    );
    let requests = double.requests();
    assert_eq!(requests[1].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(requests[1].header("x-api-key"), Some(CAPABILITY));
    let seen = requests[1].conversation.as_ref().expect("a conversation");
    assert_eq!(seen.wire, Wire::Anthropic);
    assert_eq!(seen.system.as_deref(), Some("You fix CVEs in container images."));
    assert_eq!(seen.tools[0].name, "read_file");
    assert_eq!(seen.tools[0].description.as_deref(), Some("Reads a file of the repository."));
    assert_eq!(
        seen.messages,
        vec![
            Message::User("Fix CVE-2024-0001 in this image.".into()),
            Message::Assistant {
                text: Some("Reading the Dockerfile.".into()),
                tool_calls: vec![ToolCall {
                    id: id.clone(),
                    name: "read_file".into(),
                    args: json!({"path": "Dockerfile"})
                }],
            },
            Message::ToolResult { id, content: "FROM alpine:3.20".into(), is_error: false },
            Message::User("Is it pinned?".into()),
        ]
    );
}

#[tokio::test]
async fn authorization_instead_of_x_api_key_and_an_error_result_pass() {
    let mut body = anthropic_body();
    body["system"] = json!("You fix CVEs.");
    body["messages"].as_array_mut().expect("messages").extend([
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "…", "signature": "s"},
            {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a"}},
            {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {}}
        ]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no such file", "is_error": true},
            {"type": "tool_result", "tool_use_id": "toolu_a"}
        ]}),
        json!({"role": "assistant", "content": "So far, "}),
    ]);
    let headers =
        vec![("authorization", format!("Bearer {CAPABILITY}")), ("anthropic-version", "2023-06-01".into())];
    let found = violations_of(Wire::Anthropic, &headers, &body).await;
    assert!(found.is_empty(), "{found:#?}");
}

#[tokio::test]
async fn a_tool_use_without_its_result() {
    let mut body = anthropic_body();
    body["messages"].as_array_mut().expect("messages").extend([
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}},
            {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {}}
        ]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"},
            {"type": "text", "text": "and the other?"}
        ]}),
    ]);
    let found = violations_of(Wire::Anthropic, &anthropic_headers(), &body).await;
    assert_violation(
        &found,
        "$.messages[1].content",
        "tool_use \"toolu_2\" has no tool_result in the next message",
    );
    assert_eq!(found.len(), 1, "{found:#?}");

    // Nor may the conversation end on it.
    let mut body = anthropic_body();
    body["messages"].as_array_mut().expect("messages").push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}
    ]}));
    let found = violations_of(Wire::Anthropic, &anthropic_headers(), &body).await;
    assert_violation(&found, "$.messages[1].content", "the conversation ends with it");
}

#[tokio::test]
async fn tool_results_without_a_tool_use_after_text_or_twice() {
    let mut body = anthropic_body();
    body["messages"].as_array_mut().expect("messages").extend([
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": "{}"},
            {"type": "tool_result", "tool_use_id": "toolu_1"}
        ]}),
        json!({"role": "user", "content": [
            {"type": "text", "text": "here:"},
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"},
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x", "is_error": "yes"},
            {"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"},
            {"type": "tool_use", "id": "toolu_3", "name": "read_file", "input": {}}
        ]}),
    ]);
    let found = violations_of(Wire::Anthropic, &anthropic_headers(), &body).await;
    assert_violation(&found, "$.messages[1].content[1].id", "earlier tool_use");
    assert_violation(&found, "$.messages[1].content[1].input", "must be an object, not a JSON string");
    assert_violation(&found, "$.messages[1].content[2].type", "tool_result blocks belong in user messages");
    assert_violation(&found, "$.messages[2].content[1]", "tool_result blocks must come first");
    assert_violation(&found, "$.messages[2].content[2].tool_use_id", "answered twice");
    assert_violation(&found, "$.messages[2].content[2].is_error", "must be a boolean");
    assert_violation(&found, "$.messages[2].content[3].tool_use_id", "\"toolu_9\" has no matching tool_use");
    assert_violation(&found, "$.messages[2].content[4].type", "tool_use blocks belong in assistant messages");

    let mut body = anthropic_body();
    body["messages"] = json!([
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]}
    ]);
    let found = violations_of(Wire::Anthropic, &anthropic_headers(), &body).await;
    assert_violation(&found, "$.messages[0].content[0].tool_use_id", "no matching tool_use");
}

#[tokio::test]
async fn headers() {
    let found = violations_of(Wire::Anthropic, &[("x-api-key", CAPABILITY.into())], &anthropic_body()).await;
    assert_violation(&found, "header anthropic-version", "missing; required (2023-06-01)");
    assert_eq!(found.len(), 1, "{found:#?}");

    let found =
        violations_of(Wire::Anthropic, &[("anthropic-version", "2023-06-01".into())], &anthropic_body())
            .await;
    assert_violation(&found, "header x-api-key", "missing, and no authorization header either");

    let headers = vec![("x-api-key", CAPABILITY.into()), ("anthropic-version", "2024-01-01".into())];
    let found = violations_of(Wire::Anthropic, &headers, &anthropic_body()).await;
    assert_violation(&found, "header anthropic-version", "\"2024-01-01\" is not the version");
}

#[tokio::test]
async fn max_tokens_model_stream_and_unknown_fields() {
    let mut body = anthropic_body();
    body.as_object_mut().expect("object").remove("max_tokens");
    body["stream"] = json!(true);
    body["n"] = json!(1);
    body.as_object_mut().expect("object").remove("model");
    let found = violations_of(Wire::Anthropic, &anthropic_headers(), &body).await;
    assert_violation(&found, "$.max_tokens", "missing; required");
    assert_violation(&found, "$.stream", "the double does not stream");
    assert_violation(&found, "$.n", "not a documented request field");
    assert_violation(&found, "$.model", "missing");

    for bad in [json!(0), json!(-5), json!(1.5), json!("512")] {
        let mut body = anthropic_body();
        body["max_tokens"] = bad;
        let found = violations_of(Wire::Anthropic, &anthropic_headers(), &body).await;
        assert_violation(&found, "$.max_tokens", "must be a positive integer");
    }
}

#[tokio::test]
async fn roles_system_in_messages_first_message_and_alternation() {
    let mut body = anthropic_body();
    body["messages"] = json!([
        {"role": "system", "content": "You fix CVEs."},
        {"role": "user", "content": "Fix it."},
    ]);
    let found = violations_of(Wire::Anthropic, &anthropic_headers(), &body).await;
    assert_violation(&found, "$.messages[0].role", "there is no \"system\" role in messages");

    let mut body = anthropic_body();
    body["messages"] = json!([
        {"role": "user", "content": "Fix it."},
        {"role": "user", "content": "Now."},
        {"role": "assistant", "content": "On it."},
        {"role": "assistant", "content": "Done."},
    ]);
    let found = violations_of(Wire::Anthropic, &anthropic_headers(), &body).await;
    assert_violation(&found, "$.messages[1].role", "roles must alternate, and messages[0] is \"user\" too");
    assert_violation(
        &found,
        "$.messages[3].role",
        "roles must alternate, and messages[2] is \"assistant\" too",
    );

    let mut body = anthropic_body();
    body["messages"] = json!([
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": ""},
        {"role": "tool", "content": "x"},
    ]);
    let found = violations_of(Wire::Anthropic, &anthropic_headers(), &body).await;
    assert_violation(&found, "$.messages[0].role", "the first message must be \"user\"");
    assert_violation(&found, "$.messages[1].content", "must not be empty");
    assert_violation(&found, "$.messages[2].role", "\"tool\" is not");

    let mut body = anthropic_body();
    body["messages"] = json!([]);
    assert_violation(
        &violations_of(Wire::Anthropic, &anthropic_headers(), &body).await,
        "$.messages",
        "must not be empty",
    );
}

#[tokio::test]
async fn bad_tool_declarations_and_system() {
    let mut body = anthropic_body();
    body["tools"] = json!([
        {"name": "read file", "input_schema": {"type": "object"}},
        {"name": "strings", "input_schema": {"type": "string"}},
        {"name": "no_schema"},
        {"name": "strings", "input_schema": {"type": "object", "properties": []}},
        {"type": "web_search_20250305", "name": "web_search"},
        {"type": "custom", "name": "fine", "input_schema": {"type": "object"}, "description": 7},
    ]);
    body["tool_choice"] = json!({"type": "tool", "name": "write_file"});
    body["system"] = json!([{"type": "image"}]);
    let found = violations_of(Wire::Anthropic, &anthropic_headers(), &body).await;
    assert_violation(&found, "$.tools[0].name", "does not match ^[a-zA-Z0-9_-]{1,64}$");
    assert_violation(&found, "$.tools[1].input_schema.type", "must be \"object\"");
    assert_violation(&found, "$.tools[2].input_schema", "missing; required");
    assert_violation(&found, "$.tools[3].name", "names an earlier tool");
    assert_violation(&found, "$.tools[3].input_schema.properties", "must be an object");
    assert_violation(&found, "$.tools[4].type", "server tool");
    assert_violation(&found, "$.tools[5].description", "must be a string");
    assert_violation(&found, "$.tool_choice.name", "\"write_file\" is not a declared tool");
    assert_violation(&found, "$.system[0]", "must be a text block");
}

#[tokio::test]
async fn a_well_formed_request_records_no_violation_on_the_double() {
    // The baseline of every check above: the same double, the same client,
    // nothing wrong.
    let double = ProviderDouble::start(Scripted::new(vec![Turn::text("ok")])).await.expect("start");
    let sent = post_wire(&double, Wire::Anthropic, &anthropic_body()).await;
    assert_eq!(sent.status, 200);
    assert!(double.violations().is_empty(), "{:#?}", double.violations());
}
