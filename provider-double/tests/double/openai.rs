//! OpenAI Chat Completions: the documented shape round trip, and every
//! request check firing.

use std::collections::BTreeSet;

use patchpilot_provider_double::{Message, ProviderDouble, Scripted, ToolCall, Turn, Usage, Wire};
use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn a_two_turn_tool_conversation_round_trips_in_the_documented_shape() {
    let double = ProviderDouble::start(Scripted::new(vec![
        Turn::Reply {
            text: None,
            tool_calls: vec![
                ("read_file".into(), json!({"path": "Dockerfile"})),
                ("read_file".into(), json!({"path": "go.mod"})),
            ],
            usage: None,
        },
        Turn::Reply {
            text: Some("The base image is pinned.".into()),
            tool_calls: vec![],
            usage: Some(Usage { input_tokens: 40, output_tokens: 6 }),
        },
    ]))
    .await
    .expect("start");

    let first = openai_body();
    let sent = post_wire(&double, Wire::OpenAi, &first).await;
    assert_eq!(sent.status, 200);
    assert!(sent.header("content-type").is_some_and(|t| t.starts_with("application/json")));
    let body = &sent.body;
    assert_eq!(keys(body), set(&["id", "object", "created", "model", "choices", "usage"]));
    assert_id(&body["id"], "chatcmpl-");
    assert_eq!(body["object"], "chat.completion");
    assert!(body["created"].as_u64().is_some_and(|t| t > 1_600_000_000), "created: {}", body["created"]);
    assert_eq!(body["model"], "gpt-test");
    let choices = body["choices"].as_array().expect("choices");
    assert_eq!(choices.len(), 1);
    assert_eq!(keys(&choices[0]), set(&["index", "message", "logprobs", "finish_reason"]));
    assert_eq!(choices[0]["index"], 0);
    assert_eq!(choices[0]["finish_reason"], "tool_calls");
    let message = &choices[0]["message"];
    assert_eq!(keys(message), set(&["role", "content", "refusal", "tool_calls"]));
    assert_eq!(message["role"], "assistant");
    assert!(message["content"].is_null(), "a reply of tool calls only has null content");
    let calls = message["tool_calls"].as_array().expect("tool_calls");
    assert_eq!(calls.len(), 2);
    let mut ids = BTreeSet::new();
    for (call, path) in calls.iter().zip(["Dockerfile", "go.mod"]) {
        assert_eq!(keys(call), set(&["id", "type", "function"]));
        ids.insert(assert_id(&call["id"], "call_"));
        assert_eq!(call["type"], "function");
        assert_eq!(keys(&call["function"]), set(&["name", "arguments"]));
        assert_eq!(call["function"]["name"], "read_file");
        let arguments = call["function"]["arguments"].as_str().expect("arguments are a JSON string");
        assert_eq!(serde_json::from_str::<Value>(arguments).expect("JSON"), json!({"path": path}));
    }
    assert_eq!(ids.len(), 2, "tool call ids are unique");
    let usage = &body["usage"];
    assert_eq!(keys(usage), set(&["prompt_tokens", "completion_tokens", "total_tokens"]));
    let (input, output) =
        (usage["prompt_tokens"].as_u64().expect("n"), usage["completion_tokens"].as_u64().expect("n"));
    assert_eq!(usage["total_tokens"].as_u64(), Some(input + output));
    // The documented estimate: a quarter of the request's bytes.
    assert_eq!(input, first.to_string().len().div_ceil(4) as u64);

    // The client sends the assistant message back as it came, and answers
    // both calls.
    let mut second = first.clone();
    let history = second["messages"].as_array_mut().expect("messages");
    history.push(message.clone());
    for (call, content) in calls.iter().zip(["FROM alpine:3.20", "module example.com/app"]) {
        history.push(json!({"role": "tool", "tool_call_id": call["id"], "content": content}));
    }
    let sent = post_wire(&double, Wire::OpenAi, &second).await;
    assert_eq!(sent.status, 200);
    let choice = &sent.body["choices"][0];
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(keys(&choice["message"]), set(&["role", "content", "refusal"]));
    assert_eq!(choice["message"]["content"], "The base image is pinned.");
    assert_eq!(sent.body["usage"], json!({"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46}));

    assert!(double.violations().is_empty(), "{:#?}", double.violations());
    assert_eq!(double.calls(), 2);
    assert_eq!(double.usage(), Usage { input_tokens: input + 40, output_tokens: output + 6 });
    let requests = double.requests();
    assert_eq!(requests[1].header("authorization"), Some(format!("Bearer {CAPABILITY}").as_str()));
    assert_eq!(requests[1].header("content-type"), Some("application/json"));
    assert_eq!(requests[1].json.as_ref(), Some(&second));
    assert_eq!(requests[1].status, 200);
    let seen = requests[1].conversation.as_ref().expect("a conversation");
    assert_eq!(seen.wire, Wire::OpenAi);
    assert_eq!(seen.model, "gpt-test");
    assert_eq!(seen.system.as_deref(), Some("You fix CVEs in container images."));
    assert_eq!(seen.tools.len(), 1);
    assert_eq!(seen.tools[0].name, "read_file");
    assert_eq!(seen.tools[0].schema["type"], "object");
    let ids: Vec<&str> = calls.iter().map(|c| c["id"].as_str().expect("id")).collect();
    assert_eq!(
        seen.messages,
        vec![
            Message::User("Fix CVE-2024-0001 in this image.".into()),
            Message::Assistant {
                text: None,
                tool_calls: vec![
                    ToolCall {
                        id: ids[0].into(),
                        name: "read_file".into(),
                        args: json!({"path": "Dockerfile"})
                    },
                    ToolCall { id: ids[1].into(), name: "read_file".into(), args: json!({"path": "go.mod"}) },
                ],
            },
            Message::ToolResult { id: ids[0].into(), content: "FROM alpine:3.20".into(), is_error: false },
            Message::ToolResult {
                id: ids[1].into(),
                content: "module example.com/app".into(),
                is_error: false
            },
        ]
    );
}

#[tokio::test]
async fn a_well_formed_request_with_content_parts_and_every_field_kind_passes() {
    let body = json!({
        "model": "gpt-test",
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "Fix it."}]},
            {"role": "assistant", "content": "Looking.", "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_a", "content": [{"type": "text", "text": "contents"}]},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Thanks."},
        ],
        "tools": [
            read_file_openai(),
            {"type": "function", "function": {"name": "list-files_2"}},
        ],
        "tool_choice": {"type": "function", "function": {"name": "read_file"}},
        "max_tokens": 100,
        "temperature": 0,
        "stream": false,
        "n": 1,
        "parallel_tool_calls": false,
    });
    let found = violations_of(Wire::OpenAi, &openai_headers(), &body).await;
    assert!(found.is_empty(), "{found:#?}");
}

#[tokio::test]
async fn a_tool_call_id_that_answers_no_call_of_the_preceding_assistant_message() {
    let mut body = openai_body();
    body["messages"].as_array_mut().expect("messages").extend([
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        ]}),
        json!({"role": "tool", "tool_call_id": "call_2", "content": "x"}),
    ]);
    let found = violations_of(Wire::OpenAi, &openai_headers(), &body).await;
    assert_violation(&found, "$.messages[3].tool_call_id", "\"call_2\" matches no tool call");
    assert_violation(&found, "$.messages[2].tool_calls", "\"call_1\" is not answered");
}

#[tokio::test]
async fn a_tool_call_not_answered_before_the_next_message() {
    let mut body = openai_body();
    body["messages"].as_array_mut().expect("messages").extend([
        json!({"role": "assistant", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
            {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        ]}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": "x"}),
        json!({"role": "user", "content": "go on"}),
    ]);
    let found = violations_of(Wire::OpenAi, &openai_headers(), &body).await;
    assert_violation(
        &found,
        "$.messages[2].tool_calls",
        "\"call_2\" is not answered by a tool message before messages[4]",
    );
    assert_eq!(found.len(), 1, "{found:#?}");
}

#[tokio::test]
async fn tool_messages_out_of_place_or_twice() {
    let mut body = openai_body();
    body["messages"].as_array_mut().expect("messages").extend([
        json!({"role": "tool", "tool_call_id": "call_0", "content": "x"}),
        json!({"role": "assistant", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        ]}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": "x"}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": "x"}),
        json!({"role": "tool", "content": "x"}),
    ]);
    let found = violations_of(Wire::OpenAi, &openai_headers(), &body).await;
    assert_violation(&found, "$.messages[2].tool_call_id", "answers no tool call");
    assert_violation(&found, "$.messages[5].tool_call_id", "answered twice");
    assert_violation(&found, "$.messages[6].tool_call_id", "missing");
}

#[tokio::test]
async fn arguments_sent_back_as_an_object_or_not_json() {
    let mut body = openai_body();
    body["messages"].as_array_mut().expect("messages").extend([
        json!({"role": "assistant", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "a"}}},
            {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": "}},
            {"type": "custom", "function": {"name": "read_file", "arguments": "{}"}},
            {"id": "call_1", "type": "function", "function": {"arguments": "{}"}}
        ]}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": "a"}),
        json!({"role": "tool", "tool_call_id": "call_2", "content": "b"}),
    ]);
    let found = violations_of(Wire::OpenAi, &openai_headers(), &body).await;
    assert_violation(
        &found,
        "$.messages[2].tool_calls[0].function.arguments",
        "must be a string holding JSON, not a JSON object",
    );
    assert_violation(&found, "$.messages[2].tool_calls[1].function.arguments", "the string is not JSON");
    assert_violation(&found, "$.messages[2].tool_calls[2].id", "missing");
    assert_violation(&found, "$.messages[2].tool_calls[2].type", "must be \"function\"");
    assert_violation(&found, "$.messages[2].tool_calls[3].id", "earlier tool call");
    assert_violation(&found, "$.messages[2].tool_calls[3].function.name", "missing");
}

#[tokio::test]
async fn bad_tool_declarations() {
    let mut body = openai_body();
    body["tools"] = json!([
        {"type": "function", "function": {"name": "read file", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "strings", "parameters": {"type": "string"}}},
        {"type": "function", "function": {"name": "listed", "parameters": ["path"]}},
        {"type": "function", "function": {"name": "strings", "parameters": {"type": "object", "required": "path"}}},
        {"type": "retrieval", "function": {"name": "r"}},
        {"type": "function", "function": {"name": "x".repeat(65)}},
    ]);
    body["tool_choice"] = json!({"type": "function", "function": {"name": "write_file"}});
    let found = violations_of(Wire::OpenAi, &openai_headers(), &body).await;
    assert_violation(&found, "$.tools[0].function.name", "does not match ^[a-zA-Z0-9_-]{1,64}$");
    assert_violation(&found, "$.tools[1].function.parameters.type", "must be \"object\"");
    assert_violation(
        &found,
        "$.tools[2].function.parameters",
        "must be a JSON Schema object, not a JSON array",
    );
    assert_violation(&found, "$.tools[3].function.name", "names an earlier tool");
    assert_violation(&found, "$.tools[3].function.parameters.required", "array of strings");
    assert_violation(&found, "$.tools[4].type", "must be \"function\"");
    assert_violation(&found, "$.tools[5].function.name", "does not match");
    assert_violation(&found, "$.tool_choice.function.name", "\"write_file\" is not a declared tool");
}

#[tokio::test]
async fn headers_and_top_level_fields() {
    let mut body = openai_body();
    body["stream"] = json!(true);
    body["frobnicate"] = json!(1);
    body["max_tokens"] = json!(0);
    body["n"] = json!(2);
    body["model"] = json!("");
    let found = violations_of(Wire::OpenAi, &[], &body).await;
    assert_violation(&found, "header authorization", "missing");
    assert_violation(&found, "$.stream", "the double does not stream");
    assert_violation(&found, "$.frobnicate", "not a documented request field");
    assert_violation(&found, "$.max_tokens", "positive integer");
    assert_violation(&found, "$.n", "n must be 1");
    assert_violation(&found, "$.model", "must not be empty");

    let found =
        violations_of(Wire::OpenAi, &[("authorization", "Token abc".to_owned())], &openai_body()).await;
    assert_violation(&found, "header authorization", "must be `Bearer <token>`");
    assert_eq!(found.len(), 1, "{found:#?}");
}

#[tokio::test]
async fn content_type_other_than_json() {
    let double = ProviderDouble::start(Scripted::new(vec![Turn::text("ok")])).await.expect("start");
    let resp = client()
        .post(url(&double, Wire::OpenAi))
        .header("authorization", format!("Bearer {CAPABILITY}"))
        .header("content-type", "text/plain")
        .body(openai_body().to_string())
        .send()
        .await
        .expect("answered");
    assert_eq!(resp.status(), 200, "the body is JSON all the same, so it is answered");
    assert_violation(&double.violations(), "header content-type", "\"text/plain\" is not application/json");
}

#[tokio::test]
async fn bad_messages() {
    for (messages, path, fragment) in [
        (json!([]), "$.messages", "must not be empty"),
        (json!("hi"), "$.messages", "must be an array"),
        (json!([{"role": "robot", "content": "beep"}]), "$.messages[0].role", "is not one of"),
        (json!([{"content": "who"}]), "$.messages[0].role", "missing"),
        (json!([{"role": "user"}]), "$.messages[0].content", "missing"),
        (json!([{"role": "user", "content": 3}]), "$.messages[0].content", "must be a string or an array"),
        (
            json!([{"role": "user", "content": [{"type": "video"}]}]),
            "$.messages[0].content[0].type",
            "\"video\"",
        ),
        (
            json!([{"role": "user", "content": "a"}, {"role": "assistant"}]),
            "$.messages[1].content",
            "required unless",
        ),
        (
            json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "tool_calls": []}]),
            "$.messages[1].tool_calls",
            "must not be empty",
        ),
    ] {
        let mut body = openai_body();
        body["messages"] = messages;
        let found = violations_of(Wire::OpenAi, &openai_headers(), &body).await;
        assert_violation(&found, path, fragment);
    }
    let mut body = openai_body();
    body.as_object_mut().expect("object").remove("messages");
    assert_violation(&violations_of(Wire::OpenAi, &openai_headers(), &body).await, "$.messages", "missing");
}
