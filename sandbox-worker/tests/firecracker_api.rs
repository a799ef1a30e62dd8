//! The Firecracker backend checked without Firecracker (it needs KVM, which
//! this machine lacks): every request it plans is checked against
//! Firecracker's published API description, and `start`, `kill` and the
//! fault path run against a fake `firecracker` process whose API socket this
//! test serves. The guest kernel requirements in deploy/guest/FIRECRACKER.md
//! are checked against Firecracker's CI guest kernel config.
//!
//! The reference files are read from `shared/specs/` beside the clone (as CI
//! lays it out); they are not copied into the project.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use patchpilot_sandbox::vmm::firecracker::{
    ApiCall, ApiClient, Firecracker, FirecrackerConfig, JailerConfig, boot_args,
};
use patchpilot_sandbox::vmm::{Error, VmSpec, Vmm};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use yaml_rust2::{Yaml, YamlLoader};

const API_SPEC: &str = "firecracker-api.yaml";
const KERNEL_CONFIG: &str = "firecracker-guest-kernel-x86_64-6.1.config";

fn shared_specs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/specs")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

// ---------------------------------------------------------------------------
// Firecracker's API description and a checker for request bodies.
// ---------------------------------------------------------------------------

struct ApiSpec {
    doc: Yaml,
}

impl ApiSpec {
    fn load() -> Self {
        let text = read(&shared_specs().join(API_SPEC));
        let mut docs = YamlLoader::load_from_str(&text).expect("the API description is YAML");
        assert_eq!(docs.len(), 1);
        let doc = docs.remove(0);
        assert_eq!(doc["swagger"].as_str(), Some("2.0"));
        ApiSpec { doc }
    }

    /// The path template matching `path`, and its path parameters.
    fn route(&self, path: &str) -> Option<(String, BTreeMap<String, String>)> {
        let Yaml::Hash(paths) = &self.doc["paths"] else { panic!("no paths in the API description") };
        let wanted: Vec<&str> = path.split('/').collect();
        for template in paths.keys().filter_map(Yaml::as_str) {
            let parts: Vec<&str> = template.split('/').collect();
            if parts.len() != wanted.len() {
                continue;
            }
            let mut params = BTreeMap::new();
            let matches = parts.iter().zip(&wanted).all(|(t, w)| {
                if let Some(name) = t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                    params.insert(name.to_owned(), (*w).to_owned());
                    !w.is_empty()
                } else {
                    t == w
                }
            });
            if matches {
                return Some((template.to_owned(), params));
            }
        }
        None
    }

    /// Checks one request; returns what is wrong with it.
    fn check(&self, call: &ApiCall) -> Vec<String> {
        let Some((template, params)) = self.route(&call.path) else {
            return vec![format!("{call}: no such path in the API description")];
        };
        let operation = &self.doc["paths"][template.as_str()][call.method.as_str().to_lowercase().as_str()];
        if operation.is_badvalue() {
            return vec![format!("{call}: {template} has no {} operation", call.method)];
        }
        let parameters = operation["parameters"].as_vec().cloned().unwrap_or_default();
        let mut errors = Vec::new();
        for param in &parameters {
            if param["in"].as_str() == Some("path") {
                let name = param["name"].as_str().unwrap_or_default();
                match params.get(name) {
                    // Firecracker insists the id in the path equals the body's.
                    Some(value)
                        if call.body.get(name).and_then(Value::as_str).is_some_and(|b| b != value) =>
                    {
                        errors.push(format!("{call}: path {name} {value:?} differs from the body's"))
                    }
                    Some(_) => {}
                    None => errors.push(format!("{call}: path parameter {name} missing")),
                }
            }
        }
        match parameters.iter().find(|p| p["in"].as_str() == Some("body")) {
            Some(body) => self.check_value(&body["schema"], &call.body, &call.to_string(), &mut errors),
            None if call.body.is_null() => {}
            None => errors.push(format!("{call}: the operation takes no body")),
        }
        errors
    }

    fn check_value(&self, schema: &Yaml, value: &Value, at: &str, errors: &mut Vec<String>) {
        if let Some(reference) = schema["$ref"].as_str() {
            let name = reference.trim_start_matches("#/definitions/");
            let definition = &self.doc["definitions"][name];
            assert!(!definition.is_badvalue(), "{at}: dangling reference {reference}");
            return self.check_value(definition, value, &format!("{at} ({name})"), errors);
        }
        match schema["type"].as_str() {
            Some("object") | None => {
                let Some(object) = value.as_object() else {
                    return errors.push(format!("{at}: expected an object, got {value}"));
                };
                let properties = &schema["properties"];
                for (key, field) in object {
                    let property = &properties[key.as_str()];
                    if property.is_badvalue() {
                        errors.push(format!("{at}: unknown field {key:?}"));
                    } else {
                        self.check_value(property, field, &format!("{at}.{key}"), errors);
                    }
                }
                for required in schema["required"].as_vec().into_iter().flatten().filter_map(Yaml::as_str) {
                    if !object.contains_key(required) {
                        errors.push(format!("{at}: required field {required:?} missing"));
                    }
                }
            }
            Some("string") => match value.as_str() {
                None => errors.push(format!("{at}: expected a string, got {value}")),
                Some(s) => {
                    if let Some(allowed) = schema["enum"].as_vec() {
                        let allowed: Vec<String> = allowed.iter().map(yaml_scalar).collect();
                        if !allowed.iter().any(|a| a == s) {
                            errors.push(format!("{at}: {s:?} is not one of {allowed:?}"));
                        }
                    }
                }
            },
            Some("boolean") if !value.is_boolean() => {
                errors.push(format!("{at}: expected a boolean, got {value}"))
            }
            Some("integer") => match value.as_i64() {
                None => errors.push(format!("{at}: expected an integer, got {value}")),
                Some(n) => {
                    if let Some(min) = schema["minimum"].as_i64().filter(|min| n < *min) {
                        errors.push(format!("{at}: {n} is below the minimum {min}"));
                    }
                    if let Some(max) = schema["maximum"].as_i64().filter(|max| n > *max) {
                        errors.push(format!("{at}: {n} is above the maximum {max}"));
                    }
                }
            },
            Some("number") if !value.is_number() => {
                errors.push(format!("{at}: expected a number, got {value}"))
            }
            Some("array") => match value.as_array() {
                None => errors.push(format!("{at}: expected an array, got {value}")),
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        self.check_value(&schema["items"], item, &format!("{at}[{i}]"), errors);
                    }
                }
            },
            _ => {}
        }
    }

    fn assert_valid(&self, calls: &[ApiCall]) {
        let errors: Vec<String> = calls.iter().flat_map(|c| self.check(c)).collect();
        assert!(errors.is_empty(), "requests that do not match Firecracker's API:\n{}", errors.join("\n"));
    }
}

fn yaml_scalar(y: &Yaml) -> String {
    match y {
        Yaml::String(s) | Yaml::Real(s) => s.clone(),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Boolean(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

#[test]
fn the_checker_catches_unknown_fields_wrong_types_and_missing_required_ones() {
    let spec = ApiSpec::load();
    let call = |path: &str, body: Value| ApiCall { method: hyper::Method::PUT, path: path.into(), body };
    assert!(spec.check(&call("/vsock", serde_json::json!({"guest_cid": 3, "uds_path": "/x"}))).is_empty());
    assert_eq!(
        spec.check(&call("/vsock", serde_json::json!({"guest_cid": 3, "uds_path": "/x", "x": 1}))).len(),
        1
    );
    assert_eq!(spec.check(&call("/vsock", serde_json::json!({"guest_cid": "3", "uds_path": "/x"}))).len(), 1);
    assert_eq!(spec.check(&call("/vsock", serde_json::json!({"guest_cid": 2, "uds_path": "/x"}))).len(), 1);
    assert_eq!(spec.check(&call("/vsock", serde_json::json!({"uds_path": "/x"}))).len(), 1);
    assert_eq!(spec.check(&call("/no-such-thing", serde_json::json!({}))).len(), 1);
    let drive = serde_json::json!({"drive_id": "a", "is_root_device": false, "path_on_host": "/d", "is_read_only": true});
    assert_eq!(spec.check(&call("/drives/b", drive)).len(), 1, "path id must match the body");
    // firepilot's models predate the API described here; the checker sees
    // fields Firecracker dropped since, such as the snapshot `version`.
    let old = serde_json::json!({"mem_file_path": "/m", "snapshot_path": "/s", "version": "1.0.0"});
    assert_eq!(spec.check(&call("/snapshot/create", old)).len(), 1);
}

// ---------------------------------------------------------------------------
// Fixtures: a VM spec and fake binaries.
// ---------------------------------------------------------------------------

struct Fixture {
    dir: tempfile::TempDir,
    spec: VmSpec,
}

impl Fixture {
    fn new(name: &str) -> Self {
        let dir = tempfile::tempdir().expect("temporary folder");
        let images = dir.path().join("img");
        let run_dir = dir.path().join("run").join(name);
        std::fs::create_dir_all(&images).expect("image folder");
        std::fs::create_dir_all(&run_dir).expect("run folder");
        for file in ["vmlinux", "initrd.img", "rootfs.ext4"] {
            std::fs::write(images.join(file), file).expect("image file");
        }
        std::fs::write(run_dir.join("scratch.ext4"), "scratch").expect("scratch");
        let spec = VmSpec {
            name: name.into(),
            kernel: images.join("vmlinux"),
            initrd: images.join("initrd.img"),
            rootfs: images.join("rootfs.ext4"),
            scratch: run_dir.join("scratch.ext4"),
            run_dir,
            vcpus: 2,
            memory_mib: 1024,
            kernel_args: vec!["quiet".into(), "patchpilot.vsock_port=1024".into()],
            guest_cid: 42,
        };
        Fixture { dir, spec }
    }

    /// A fake program that records its arguments and environment next to
    /// itself and then sleeps, standing in for firecracker or the jailer.
    fn fake_program(&self, name: &str, exit_early: bool) -> PathBuf {
        let bin = self.dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("bin folder");
        let path = bin.join(name);
        let tail = if exit_early {
            "echo 'Error creating the Kvm object: No such file or directory' >&2\nexit 1"
        } else {
            "exec /bin/sleep 600"
        };
        let script = format!(
            "#!/bin/sh\necho $$ > \"$0.pid\"\nprintf '%s\\n' \"$@\" > \"$0.args\"\n/usr/bin/env > \"$0.env\"\n{tail}\n"
        );
        std::fs::write(&path, script).expect("fake program");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    fn direct(&self) -> Firecracker {
        Firecracker::new(FirecrackerConfig {
            binary: self.fake_program("firecracker", false),
            jailer: None,
            api_timeout_secs: 5,
        })
    }

    fn jailed(&self) -> Firecracker {
        Firecracker::new(FirecrackerConfig {
            binary: self.fake_program("firecracker", false),
            jailer: Some(JailerConfig {
                binary: self.fake_program("jailer", false),
                uid: 12345,
                gid: 12346,
                chroot_base: self.dir.path().join("jail"),
                cgroup_version: 2,
                parent_cgroup: None,
                cgroups: vec!["cpu.max=200000 100000".into()],
                netns: Some("/var/run/netns/pp-fc".into()),
            }),
            api_timeout_secs: 5,
        })
    }
}

fn body<'a>(calls: &'a [ApiCall], path: &str) -> &'a Value {
    &calls.iter().find(|c| c.path == path).unwrap_or_else(|| panic!("no request to {path}")).body
}

// ---------------------------------------------------------------------------
// Planned requests against the API description.
// ---------------------------------------------------------------------------

#[test]
fn every_boot_request_is_in_firecrackers_api_description() {
    let api = ApiSpec::load();
    let fixture = Fixture::new("r-direct");
    let plan = fixture.direct().plan(&fixture.spec).expect("plan");
    api.assert_valid(&plan);
    let order: Vec<String> = plan.iter().map(ToString::to_string).collect();
    assert_eq!(
        order,
        [
            "PUT /logger",
            "PUT /machine-config",
            "PUT /boot-source",
            "PUT /drives/rootfs",
            "PUT /drives/scratch",
            "PUT /vsock",
            "PUT /actions",
        ]
    );
}

#[test]
fn the_guest_gets_a_read_only_root_a_writable_scratch_vsock_and_no_network() {
    let fixture = Fixture::new("r-direct");
    let spec = &fixture.spec;
    let plan = fixture.direct().plan(spec).expect("plan");
    let s = |p: &Path| p.to_str().expect("utf-8").to_owned();
    assert_eq!(
        body(&plan, "/boot-source"),
        &serde_json::json!({
            "kernel_image_path": s(&spec.kernel),
            "initrd_path": s(&spec.initrd),
            "boot_args": "console=ttyS0 reboot=k panic=1 pci=off quiet patchpilot.vsock_port=1024",
        })
    );
    assert_eq!(boot_args(spec), body(&plan, "/boot-source")["boot_args"]);
    assert_eq!(
        body(&plan, "/drives/rootfs"),
        &serde_json::json!({"drive_id": "rootfs", "path_on_host": s(&spec.rootfs), "is_read_only": true, "is_root_device": false})
    );
    assert_eq!(
        body(&plan, "/drives/scratch"),
        &serde_json::json!({"drive_id": "scratch", "path_on_host": s(&spec.scratch), "is_read_only": false, "is_root_device": false})
    );
    assert_eq!(body(&plan, "/machine-config"), &serde_json::json!({"vcpu_count": 2, "mem_size_mib": 1024}));
    assert_eq!(
        body(&plan, "/vsock"),
        &serde_json::json!({"guest_cid": 42, "uds_path": s(&spec.vsock_path())})
    );
    assert_eq!(body(&plan, "/actions"), &serde_json::json!({"action_type": "InstanceStart"}));
    assert!(plan.iter().all(|c| !c.path.starts_with("/network-interfaces") && c.path != "/mmds"), "{plan:?}");
    // Nothing but the spec's paths, sizes and arguments goes in: no secrets.
    let everything = serde_json::to_string(&plan.iter().map(|c| &c.body).collect::<Vec<_>>()).expect("json");
    assert!(!everything.contains("TOKEN") && !everything.contains("docker.sock"), "{everything}");
}

#[test]
fn jailed_requests_use_paths_inside_the_jail() {
    let api = ApiSpec::load();
    let fixture = Fixture::new("r-jailed");
    let plan = fixture.jailed().plan(&fixture.spec).expect("plan");
    api.assert_valid(&plan);
    assert_eq!(body(&plan, "/boot-source")["kernel_image_path"], "/vmlinux");
    assert_eq!(body(&plan, "/boot-source")["initrd_path"], "/initrd.img");
    assert_eq!(body(&plan, "/drives/rootfs")["path_on_host"], "/rootfs.ext4");
    assert_eq!(body(&plan, "/drives/scratch")["path_on_host"], "/scratch.ext4");
    assert_eq!(body(&plan, "/vsock")["uds_path"], "/run/vm.vsock");
    assert_eq!(body(&plan, "/logger")["log_path"], "/firecracker.log");
}

#[test]
fn snapshot_pause_and_resume_requests_are_in_the_api_description() {
    let api = ApiSpec::load();
    let fixture = Fixture::new("r-snap");
    let snapshot = fixture.dir.path().join("vm.snap");
    let mem = fixture.dir.path().join("vm.mem");
    let calls = [
        ApiCall::pause().expect("pause"),
        ApiCall::resume().expect("resume"),
        ApiCall::create_snapshot("/snapshot/vm.snap", "/snapshot/vm.mem").expect("create"),
        ApiCall::instance_start().expect("start"),
    ];
    api.assert_valid(&calls);
    assert_eq!(calls[0].to_string(), "PATCH /vm");
    assert_eq!(calls[0].body, serde_json::json!({"state": "Paused"}));
    assert_eq!(calls[1].body, serde_json::json!({"state": "Resumed"}));
    assert_eq!(
        calls[2].body,
        serde_json::json!({"snapshot_path": "/snapshot/vm.snap", "mem_file_path": "/snapshot/vm.mem", "snapshot_type": "Full"})
    );

    let direct = fixture.direct().restore_plan(&fixture.spec, &snapshot, &mem).expect("restore plan");
    api.assert_valid(&direct);
    assert_eq!(
        direct.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["PUT /logger", "PUT /snapshot/load"]
    );
    let load = body(&direct, "/snapshot/load");
    assert_eq!(
        load["mem_backend"],
        serde_json::json!({"backend_type": "File", "backend_path": mem.to_str()})
    );
    assert_eq!(load["snapshot_path"], snapshot.to_str().expect("utf-8"));
    assert_eq!(load["resume_vm"], true);
    assert_eq!(load["vsock_override"]["uds_path"], fixture.spec.vsock_path().to_str().expect("utf-8"));
    assert!(load.get("mem_file_path").is_none(), "the deprecated mem_file_path is not sent");

    let jailed = fixture.jailed().restore_plan(&fixture.spec, &snapshot, &mem).expect("restore plan");
    api.assert_valid(&jailed);
    let load = body(&jailed, "/snapshot/load");
    assert_eq!(load["snapshot_path"], "/snapshot/vm.snap");
    assert_eq!(load["mem_backend"]["backend_path"], "/snapshot/vm.mem");
    assert!(load.get("vsock_override").is_none(), "in a jail the vsock path never moves");
}

// ---------------------------------------------------------------------------
// The jailer's command line and the jail's layout.
// ---------------------------------------------------------------------------

#[test]
fn the_jailer_command_line_and_jail_layout_are_as_documented() {
    let fixture = Fixture::new("r-jailed");
    let fc = fixture.jailed();
    let command = fc.command_line(&fixture.spec).expect("command line");
    let base = fixture.dir.path().join("jail");
    let firecracker = std::fs::canonicalize(fixture.dir.path().join("bin/firecracker")).expect("canonical");
    assert_eq!(command.program, fixture.dir.path().join("bin/jailer"));
    let expected: Vec<String> = [
        "--id",
        "r-jailed",
        "--exec-file",
        firecracker.to_str().expect("utf-8"),
        "--uid",
        "12345",
        "--gid",
        "12346",
        "--chroot-base-dir",
        base.to_str().expect("utf-8"),
        "--cgroup-version",
        "2",
        "--cgroup",
        "cpu.max=200000 100000",
        "--netns",
        "/var/run/netns/pp-fc",
        "--",
        "--api-sock",
        "/run/firecracker.socket",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(command.args, expected);

    let paths = fc.paths(&fixture.spec).expect("paths");
    let jail = paths.jail.as_ref().expect("jailed");
    assert_eq!(jail.dir, base.join("firecracker/r-jailed"));
    assert_eq!(jail.root, base.join("firecracker/r-jailed/root"));
    assert_eq!(jail.cgroup.as_deref(), Some(Path::new("/sys/fs/cgroup/firecracker/r-jailed")));
    assert_eq!(paths.api_socket, jail.root.join("run/firecracker.socket"));
    assert_eq!(paths.vsock, jail.root.join("run/vm.vsock"), "the host end of the vsock is inside the jail");
    assert_eq!(paths.console, fixture.spec.console_path(), "the console stays in the run folder");

    let direct = fixture.direct().command_line(&fixture.spec).expect("command line");
    assert_eq!(
        direct.args,
        ["--api-sock", fixture.spec.run_dir.join("fc.sock").to_str().expect("utf-8"), "--id", "r-jailed"]
    );
}

#[test]
fn the_jailer_refuses_an_exec_file_not_named_firecracker_and_missing_binaries_say_how_to_install() {
    let fixture = Fixture::new("r-jailed");
    let mut config = fixture.jailed().config().clone();
    config.binary = fixture.fake_program("vmm", false);
    assert!(matches!(Firecracker::new(config).command_line(&fixture.spec), Err(Error::Start { .. })));

    let mut config = fixture.jailed().config().clone();
    if let Some(jailer) = config.jailer.as_mut() {
        jailer.binary = fixture.dir.path().join("bin/no-jailer");
    }
    match Firecracker::new(config).command_line(&fixture.spec) {
        Err(Error::Missing { what, hint, .. }) => {
            assert_eq!(what, "jailer");
            assert!(hint.contains("firecracker-microvm/firecracker/releases"), "{hint}");
        }
        other => panic!("expected Missing, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// A fake Firecracker API on a Unix socket (Firecracker itself needs KVM).
// ---------------------------------------------------------------------------

type Seen = Arc<Mutex<Vec<ApiCall>>>;

/// Serves Firecracker's API shape: 204 for every request, except a 400 with
/// a `fault_message` for `fault` (`"PUT /vsock"`, say).
fn serve_fake_api(socket: &Path, fault: Option<(&'static str, &'static str)>) -> Seen {
    let listener = UnixListener::bind(socket).expect("bind the fake API socket");
    let seen: Seen = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let _ = answer(stream, record, fault).await;
            });
        }
    });
    seen
}

async fn answer(stream: UnixStream, seen: Seen, fault: Option<(&str, &str)>) -> std::io::Result<()> {
    let mut stream = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if stream.read_line(&mut request_line).await? == 0 {
            return Ok(());
        }
        let mut parts = request_line.split_whitespace();
        let (method, path) =
            (parts.next().unwrap_or_default().to_owned(), parts.next().unwrap_or_default().to_owned());
        let mut length = 0;
        loop {
            let mut header = String::new();
            stream.read_line(&mut header).await?;
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        stream.read_exact(&mut body).await?;
        let body: Value = if body.is_empty() { Value::Null } else { serde_json::from_slice(&body)? };
        let call = ApiCall { method: method.parse().unwrap_or(hyper::Method::GET), path, body };
        let response = match fault {
            Some((which, message)) if call.to_string() == which => {
                let json = serde_json::json!({ "fault_message": message }).to_string();
                format!(
                    "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
                    json.len()
                )
            }
            _ => "HTTP/1.1 204 No Content\r\n\r\n".to_owned(),
        };
        seen.lock().expect("lock").push(call);
        stream.get_mut().write_all(response.as_bytes()).await?;
    }
}

/// Waits for the fake program to have started (it records its arguments),
/// then serves the API where Firecracker would.
async fn serve_once_started(
    program: PathBuf,
    socket: PathBuf,
    fault: Option<(&'static str, &'static str)>,
) -> Seen {
    let args = PathBuf::from(format!("{}.args", program.display()));
    for _ in 0..500 {
        if args.exists() {
            return serve_fake_api(&socket, fault);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the fake {} never started", program.display());
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn a_fault_message_becomes_an_api_error_with_that_message() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let socket = dir.path().join("api.sock");
    let message = "Invalid CID: 2. The CID must be greater than 2.";
    let _seen = serve_fake_api(&socket, Some(("PUT /vsock", message)));
    let client = ApiClient::new(&socket, Duration::from_secs(5));
    let call = ApiCall {
        method: hyper::Method::PUT,
        path: "/vsock".into(),
        body: serde_json::json!({"guest_cid": 2, "uds_path": "/v"}),
    };
    match client.send(&call).await {
        Err(Error::Api { backend, method, path, status, body }) => {
            assert_eq!(
                (backend.as_str(), method.as_str(), path.as_str(), status),
                ("firecracker", "PUT", "/vsock", 400)
            );
            assert_eq!(body, message);
        }
        other => panic!("expected an API error, got {other:?}"),
    }
    client.send(&ApiCall::pause().expect("pause")).await.expect("a 204 is success");
}

#[tokio::test]
async fn start_configures_a_fake_firecracker_over_its_socket_and_kill_leaves_nothing() {
    let api = ApiSpec::load();
    let fixture = Fixture::new("r-start");
    let fc = fixture.direct();
    let paths = fc.paths(&fixture.spec).expect("paths");
    let server = tokio::spawn(serve_once_started(
        fixture.dir.path().join("bin/firecracker"),
        paths.api_socket.clone(),
        None,
    ));
    let mut vm = fc.start(&fixture.spec).await.expect("start");
    let seen = server.await.expect("fake API");
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(
        seen,
        fc.plan(&fixture.spec).expect("plan"),
        "the requests on the wire are the plan, in order"
    );
    api.assert_valid(&seen);

    assert_eq!(vm.vsock_path(), fixture.spec.vsock_path());
    let pids = vm.pids();
    assert_eq!(pids.len(), 1);
    assert!(alive(pids[0]));
    assert!(fixture.spec.console_path().exists(), "stdout (the serial console) goes to the console log");
    let env = read(&fixture.dir.path().join("bin/firecracker.env"));
    assert!(
        !env.contains("CARGO") && !env.contains("HOME="),
        "the VMM must get an empty environment:\n{env}"
    );
    assert!(!vm.wait_exit(Duration::from_millis(50)).await.expect("wait"), "still running");

    vm.kill().await.expect("kill");
    assert!(!alive(pids[0]), "the process is gone");
    assert!(!paths.api_socket.exists(), "the API socket is removed");
    assert!(vm.wait_exit(Duration::from_millis(10)).await.expect("wait"));
    vm.kill().await.expect("a second kill is harmless");
}

#[tokio::test]
async fn a_refused_request_fails_the_start_with_firecrackers_words_and_kills_the_process() {
    let fixture = Fixture::new("r-refused");
    let fc = fixture.direct();
    let paths = fc.paths(&fixture.spec).expect("paths");
    let message = "Unable to create the vsock device: Address in use";
    let server = tokio::spawn(serve_once_started(
        fixture.dir.path().join("bin/firecracker"),
        paths.api_socket.clone(),
        Some(("PUT /vsock", message)),
    ));
    let result = fc.start(&fixture.spec).await;
    let seen = server.await.expect("fake API");
    match result {
        Err(Error::Api { path, status, body, .. }) => {
            assert_eq!((path.as_str(), status, body.as_str()), ("/vsock", 400, message));
        }
        other => panic!("expected an API error, got {other:?}"),
    }
    assert!(
        seen.lock().expect("lock").iter().all(|c| c.path != "/actions"),
        "nothing is sent after a refusal"
    );
    assert!(!paths.api_socket.exists(), "the API socket is removed");
    let pid: u32 = read(&fixture.dir.path().join("bin/firecracker.pid")).trim().parse().expect("pid");
    assert!(!alive(pid), "the fake firecracker ({pid}) is gone");
}

#[tokio::test]
async fn a_firecracker_that_dies_at_once_gives_a_start_error_with_its_stderr() {
    let fixture = Fixture::new("r-dies");
    let fc = Firecracker::new(FirecrackerConfig {
        binary: fixture.fake_program("firecracker", true),
        jailer: None,
        api_timeout_secs: 5,
    });
    match fc.start(&fixture.spec).await {
        Err(Error::Start { backend, reason }) => {
            assert_eq!(backend, "firecracker");
            assert!(reason.contains("Error creating the Kvm object"), "{reason}");
        }
        other => panic!("expected a start error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_jailed_start_links_the_files_into_the_jail_and_kill_removes_the_jail() {
    use std::os::unix::fs::MetadataExt;
    let api = ApiSpec::load();
    let fixture = Fixture::new("r-jail-start");
    let fc = fixture.jailed();
    let paths = fc.paths(&fixture.spec).expect("paths");
    let jail = paths.jail.clone().expect("jailed");
    // Something left by an earlier VM of the same name goes first.
    std::fs::create_dir_all(jail.root.join("stale")).expect("stale jail");
    let server = tokio::spawn(serve_once_started(
        fixture.dir.path().join("bin/jailer"),
        paths.api_socket.clone(),
        None,
    ));
    let mut vm = fc.start(&fixture.spec).await.expect("start");
    let seen = server.await.expect("fake API").lock().expect("lock").clone();
    api.assert_valid(&seen);
    assert_eq!(seen, fc.plan(&fixture.spec).expect("plan"));

    assert_eq!(vm.vsock_path(), jail.root.join("run/vm.vsock"));
    assert!(!jail.root.join("stale").exists());
    for (host, inside) in [
        (&fixture.spec.kernel, "vmlinux"),
        (&fixture.spec.initrd, "initrd.img"),
        (&fixture.spec.rootfs, "rootfs.ext4"),
        (&fixture.spec.scratch, "scratch.ext4"),
    ] {
        let (a, b) = (
            std::fs::metadata(host).expect("host file"),
            std::fs::metadata(jail.root.join(inside)).expect("jail file"),
        );
        assert_eq!((a.dev(), a.ino()), (b.dev(), b.ino()), "{inside} is a hard link of {}", host.display());
    }
    let scratch = std::fs::metadata(jail.root.join("scratch.ext4")).expect("scratch");
    assert_eq!((scratch.uid(), scratch.gid()), (12345, 12346), "Firecracker's user owns the scratch disc");
    let run = std::fs::metadata(jail.root.join("run")).expect("run");
    assert_eq!((run.uid(), run.gid()), (12345, 12346), "Firecracker's user can create its sockets");
    let rootfs = std::fs::metadata(&fixture.spec.rootfs).expect("rootfs");
    assert_eq!(rootfs.uid(), 0, "the shared root image keeps its owner");

    let pid = vm.pids()[0];
    vm.kill().await.expect("kill");
    assert!(!alive(pid));
    assert!(!jail.dir.exists(), "the jail is removed");
    assert!(fixture.spec.scratch.exists(), "the run's own scratch file is untouched");
}

// ---------------------------------------------------------------------------
// The guest kernel: FIRECRACKER.md against Firecracker's CI guest config.
// ---------------------------------------------------------------------------

#[test]
fn firecracker_md_says_truly_what_firecrackers_ci_guest_kernel_has() {
    let config = read(&shared_specs().join(KERNEL_CONFIG));
    let value = |option: &str| -> String {
        for line in config.lines() {
            if let Some(v) = line.strip_prefix(&format!("{option}=")) {
                return v.to_owned();
            }
        }
        "not set".to_owned()
    };
    let doc = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/guest/FIRECRACKER.md"));
    // Rows of the form "| `CONFIG_X` | y | ..." (the second column is the CI config's value).
    let mut claims = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() > 3
            && let Some(option) = cells[1].strip_prefix('`').and_then(|c| c.strip_suffix('`'))
            && option.starts_with("CONFIG_")
        {
            claims.insert(option.to_owned(), cells[2].to_owned());
        }
    }
    for needed in [
        "CONFIG_VIRTIO_MMIO",
        "CONFIG_VIRTIO_BLK",
        "CONFIG_VSOCKETS",
        "CONFIG_VIRTIO_VSOCKETS",
        "CONFIG_EXT4_FS",
        "CONFIG_OVERLAY_FS",
        "CONFIG_BLK_DEV_INITRD",
        "CONFIG_SERIAL_8250_CONSOLE",
        "CONFIG_CGROUPS",
        "CONFIG_MEMCG",
        "CONFIG_NETFILTER",
        "CONFIG_BRIDGE",
        "CONFIG_VETH",
        "CONFIG_MODULES",
    ] {
        assert!(claims.contains_key(needed), "FIRECRACKER.md does not list {needed}");
    }
    let wrong: Vec<String> = claims
        .iter()
        .filter(|(option, claimed)| value(option) != **claimed)
        .map(|(option, claimed)| {
            format!("{option}: the doc says {claimed:?}, the CI config has {:?}", value(option))
        })
        .collect();
    assert!(wrong.is_empty(), "FIRECRACKER.md is wrong about the CI guest config:\n{}", wrong.join("\n"));
}
