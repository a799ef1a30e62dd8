//! The scanner service end to end: images pushed to a real registry are
//! discovered, scanned and matched against real OSV records; the findings
//! are exactly the expected ones; a retag to a new digest is scanned again
//! and an unchanged digest is not. Also the `patchpilot db` and
//! `patchpilot scan` commands.

use std::time::Duration;

use anyhow::Context as _;

use patchpilot_e2e::images::{
    image_config, image_config_created, push_image, push_image_as, scanner_fixtures, vulnerable_app_layers,
};
use patchpilot_e2e::{Registry, Service, Stack, wait_for};
use patchpilot_fleet::bus::StreamName;
use patchpilot_model::{Assessment, Severity};
use prost::Message as _;

/// (id, package, installed version, first fixed version, severity).
type Row = (String, String, String, String, Severity);

fn expected() -> Vec<Row> {
    let row = |id: &str, p: &str, v: &str, fix: &str, s| {
        (id.to_owned(), p.to_owned(), v.to_owned(), fix.to_owned(), s)
    };
    vec![
        row("CVE-2020-14343", "PyYAML", "5.3.1", "5.4", Severity::Critical),
        row("CVE-2021-23424", "ansi-html", "0.0.7", "0.0.8", Severity::High),
        row("CVE-2025-26519", "musl", "1.1.14-r10", "1.2.4_git20230717-r5", Severity::High),
        row("CVE-2025-26519", "musl-utils", "1.1.14-r10", "1.2.4_git20230717-r5", Severity::High),
    ]
}

fn rows(a: &Assessment) -> Vec<Row> {
    a.findings
        .iter()
        .map(|f| {
            (
                f.id.clone(),
                f.package.name.clone(),
                f.package.version.clone(),
                f.fixed_versions.first().cloned().unwrap_or_default(),
                f.severity,
            )
        })
        .collect()
}

async fn assessments(stack: &Stack) -> anyhow::Result<Vec<Assessment>> {
    stack
        .stream_contents(StreamName::Assessments)
        .await?
        .into_iter()
        .map(|m| {
            let proto = patchpilot_proto::v1::Assessment::decode(m.payload.as_ref())?;
            Ok(Assessment::from_proto(proto)?.0)
        })
        .collect()
}

/// Imports the osv fixtures into a DB folder with the CLI.
async fn advisory_db(stack: &Stack) -> anyhow::Result<std::path::PathBuf> {
    let db = stack.dir.path().join("advisories");
    let records = scanner_fixtures().join("osv/records");
    let out = stack
        .cli(&["db", "import", records.to_str().unwrap_or_default(), "--db", db.to_str().unwrap_or_default()])
        .await?;
    anyhow::ensure!(out.code == Some(0), "db import: {}", out.stderr);
    Ok(db)
}

#[tokio::test]
async fn discovered_images_are_scanned_once_per_digest_with_exactly_the_expected_findings()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let registry = Registry::start().await?;
    let db = advisory_db(&stack).await?;
    let layers = vulnerable_app_layers(&[]);
    let first = push_image(&registry, "acme/app", "1.0", &layers, image_config(&layers, &[])).await?;
    // Tags that are not versions: the newest image by creation time is
    // "latest", so only `edge` is scanned.
    let tool = vulnerable_app_layers(&[("etc/tool", b"tool\n".to_vec())]);
    push_image(
        &registry,
        "acme/tool",
        "stable",
        &tool,
        image_config_created(&tool, &[], "2026-01-01T00:00:00Z"),
    )
    .await?;
    let edge = push_image(
        &registry,
        "acme/tool",
        "edge",
        &tool,
        image_config_created(&tool, &[], "2026-06-01T00:00:00Z"),
    )
    .await?;

    let config = format!(
        r#"
[scanner]
db = "{db}"
cache_dir = "{cache}"
platform = "linux/amd64"
[scanner.registry]
insecure = ["{registry}"]
[scanner.discovery]
enabled = true
interval_secs = 1
[[scanner.discovery.targets]]
registry = "{registry}"
"#,
        db = db.display(),
        cache = stack.dir.path().join("blob-cache").display(),
        registry = registry.addr,
    );
    let config = stack.write_config("scanner.toml", &config)?;
    let log = stack.dir.path().join("scanner.log");
    let scanner = Service::spawn("patchpilot-scanner", &config, &stack.env(), log)?;

    let found = wait_for("the first assessments", Duration::from_secs(60), || async {
        let a = assessments(&stack).await?;
        Ok((a.len() >= 2).then_some(a))
    })
    .await
    .map_err(|e| e.context(scanner.log_text()))?;
    assert_eq!(found.len(), 2);
    let tool_scan = found.iter().find(|a| a.image.contains("acme/tool")).expect("acme/tool scanned");
    assert_eq!(
        tool_scan.image,
        format!("{}/acme/tool:edge", registry.addr),
        "the newer of two non-version tags"
    );
    assert_eq!(tool_scan.digest.as_str(), edge);
    let a = found.iter().find(|a| a.image.contains("acme/app")).expect("acme/app scanned");
    assert_eq!(a.image, format!("{}/acme/app:1.0", registry.addr));
    assert_eq!(a.digest.as_str(), first);
    assert_eq!(a.os.as_ref().map(|o| o.ecosystem.as_str()), Some("Alpine:v3.19"));
    assert_eq!(rows(a), expected(), "exactly these findings; the whited-out PyYAML 5.1 is not one");
    assert!(a.findings.iter().all(|f| !f.package.layer.is_empty()), "every finding names its layer");

    // Several discovery passes over an unchanged digest ask for nothing.
    wait_for("three more discovery passes", Duration::from_secs(20), || async {
        Ok((scanner.log_text().matches("discovery pass").count() >= 4).then_some(()))
    })
    .await?;
    assert_eq!(assessments(&stack).await?.len(), 2, "an unchanged digest is not scanned again");

    // A rebuild pushed under the same tag has a new digest: scanned again.
    let rebuilt = vulnerable_app_layers(&[("etc/motd", b"rebuilt\n".to_vec())]);
    let second = push_image(&registry, "acme/app", "1.0", &rebuilt, image_config(&rebuilt, &[])).await?;
    assert_ne!(first, second);
    let found = wait_for("the rescan of the new digest", Duration::from_secs(60), || async {
        let a = assessments(&stack).await?;
        Ok((a.len() == 3).then_some(a))
    })
    .await
    .map_err(|e| e.context(scanner.log_text()))?;
    assert_eq!(found[2].digest.as_str(), second);
    assert_eq!(rows(&found[2]), expected());
    Ok(())
}

#[tokio::test]
async fn db_and_scan_commands() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let db = advisory_db(&stack).await?;
    let db_arg = db.to_str().unwrap_or_default();

    let status = stack.cli(&["db", "status", "--db", db_arg, "--json"]).await?;
    assert_eq!(status.code, Some(0), "{}", status.stderr);
    let status: serde_json::Value = serde_json::from_str(&status.stdout)?;
    assert!(status["records"].as_u64().is_some_and(|n| n >= 9), "{status}");
    assert!(status["ecosystems"]["Alpine"].as_u64().is_some_and(|n| n >= 1), "{status}");
    assert!(status["age_hours"].as_i64().is_some_and(|h| h < 1), "{status}");

    // Exit 1 when affected, 0 when not.
    let affected = stack
        .cli(&[
            "db",
            "query",
            "--db",
            db_arg,
            "--ecosystem",
            "PyPI",
            "--package",
            "pyyaml",
            "--version",
            "5.3.1",
        ])
        .await?;
    assert_eq!(affected.code, Some(1), "{}", affected.stdout);
    assert!(
        affected.stdout.contains("GHSA-8q59-q68h-6hv4") && affected.stdout.contains("fixed in 5.4"),
        "{}",
        affected.stdout
    );
    let fixed = stack
        .cli(&[
            "db",
            "query",
            "--db",
            db_arg,
            "--ecosystem",
            "PyPI",
            "--package",
            "PyYAML",
            "--version",
            "5.4",
        ])
        .await?;
    assert_eq!(fixed.code, Some(0), "{}", fixed.stdout);

    // `scan --rootfs` on a folder; its JSON output is a native assessment
    // document that `submit --dry-run` accepts as it is.
    let root = stack.dir.path().join("rootfs");
    for (path, data) in [
        ("etc/os-release", "ID=alpine\nVERSION_ID=3.19.1\n".to_owned()),
        (
            "lib/apk/db/installed",
            std::fs::read_to_string(
                scanner_fixtures().join("catalog/apk/trivy-alpine/lib/apk/db/installed"),
            )?,
        ),
    ] {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap_or(&root))?;
        std::fs::write(file, data)?;
    }
    let report = stack.dir.path().join("report.json");
    let scan = stack
        .cli(&[
            "scan",
            "--rootfs",
            root.to_str().unwrap_or_default(),
            "--db",
            db_arg,
            "--format",
            "json",
            "-o",
            report.to_str().unwrap_or_default(),
        ])
        .await?;
    assert_eq!(scan.code, Some(0), "{}", scan.stderr);
    let dry = stack.cli(&["submit", "--dry-run", report.to_str().unwrap_or_default()]).await?;
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    let doc: serde_json::Value = serde_json::from_str(&dry.stdout)?;
    let ids: Vec<&str> = doc["assessments"][0]["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert_eq!(ids, vec!["CVE-2025-26519", "CVE-2025-26519"], "musl and musl-utils");
    // The SBOM formats: SPDX 2.3 JSON and CycloneDX 1.6 of the same scan
    // (validated against their schemas in scanner/tests/report_formats.rs).
    let spdx = stack
        .cli(&[
            "scan",
            "--rootfs",
            root.to_str().unwrap_or_default(),
            "--db",
            db_arg,
            "--format",
            "spdx-json",
        ])
        .await?;
    assert_eq!(spdx.code, Some(0), "{}", spdx.stderr);
    let doc: serde_json::Value = serde_json::from_str(&spdx.stdout)?;
    assert_eq!(doc["spdxVersion"], "SPDX-2.3");
    let purls: Vec<&str> = doc["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["externalRefs"].as_array().into_iter().flatten())
        .filter_map(|r| r["referenceLocator"].as_str())
        .collect();
    assert!(purls.contains(&"pkg:apk/alpine/musl@1.1.14-r10?arch=x86_64&distro=alpine-3.19.1"), "{purls:?}");
    assert!(
        doc["packages"][0].get("checksums").is_none(),
        "a root filesystem's digest is no checksum of anything: {}",
        doc["packages"][0]
    );
    let bom = stack
        .cli(&[
            "scan",
            "--rootfs",
            root.to_str().unwrap_or_default(),
            "--db",
            db_arg,
            "--format",
            "cyclonedx",
        ])
        .await?;
    assert_eq!(bom.code, Some(0), "{}", bom.stderr);
    let bom: serde_json::Value = serde_json::from_str(&bom.stdout)?;
    assert_eq!(bom["specVersion"], "1.6");
    assert_eq!(bom["dependencies"][0]["ref"], "image");
    let unknown = stack
        .cli(&["scan", "--rootfs", root.to_str().unwrap_or_default(), "--db", db_arg, "--format", "spdx"])
        .await?;
    assert_ne!(unknown.code, Some(0));
    assert!(unknown.stderr.contains("spdx-json"), "the error lists the formats: {}", unknown.stderr);
    // --fail-on turns findings into an exit code.
    let gate = stack
        .cli(&["scan", "--rootfs", root.to_str().unwrap_or_default(), "--db", db_arg, "--fail-on", "high"])
        .await?;
    assert_eq!(gate.code, Some(1), "{}", gate.stdout);
    assert!(gate.stdout.contains("CVE-2025-26519"), "{}", gate.stdout);
    Ok(())
}

#[tokio::test]
async fn registry_credentials_come_from_config_or_a_docker_config() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let db = advisory_db(&stack).await?;
    let registry = Registry::start_with_basic_auth("robot", "s3cret").await?;
    let layers = vulnerable_app_layers(&[]);
    push_image_as(
        &registry,
        Some(("robot", "s3cret")),
        "private/app",
        "2.0",
        &layers,
        image_config(&layers, &[]),
    )
    .await?;
    let reference = format!("{}/private/app:2.0", registry.addr);
    let scan = |config: String| {
        let path = stack.write_config(&format!("cli-{}.toml", config.len()), &config);
        let (db, reference) = (db.clone(), reference.clone());
        let stack = &stack;
        async move {
            let path = path?;
            let args = [
                "--config",
                path.to_str().unwrap_or_default(),
                "scan",
                &reference,
                "--db",
                db.to_str().unwrap_or_default(),
                "--format",
                "json",
            ];
            stack.cli(&args).await
        }
    };
    let cache = stack.dir.path().join("cache");
    let base = format!(
        "[scanner]\ncache_dir = \"{}\"\n[scanner.registry]\ninsecure = [\"{}\"]\n",
        cache.display(),
        registry.addr
    );

    // Anonymous: refused, and the error says by whom.
    let out = scan(base.clone()).await?;
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("private/app"), "{}", out.stderr);

    // A password file named by the config.
    let password = stack.dir.path().join("registry-password");
    std::fs::write(&password, "s3cret\n")?;
    let out = scan(format!(
        "{base}[[scanner.registry.credentials]]\nregistry = \"{}\"\nusername = \"robot\"\npassword_file = \"{}\"\n",
        registry.addr,
        password.display()
    ))
    .await?;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout)?;
    assert_eq!(doc["assessments"][0]["findings"].as_array().map(Vec::len), Some(4));

    // A Docker config.json `auths` entry (base64 "robot:s3cret").
    let docker_config = stack.dir.path().join("docker-config.json");
    std::fs::write(
        &docker_config,
        format!(r#"{{"auths":{{"{}":{{"auth":"cm9ib3Q6czNjcmV0"}}}}}}"#, registry.addr),
    )?;
    let out = scan(format!("{base}docker_config = \"{}\"\n", docker_config.display())).await?;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    Ok(())
}

/// The conventions Trivy and Grype users bring: `--severity` and
/// `--ignore-unfixed` filter the report and the exit status, `--exit-code
/// N` gives findings a status of their own (an error stays 1), an ignore
/// file in `.trivyignore`'s format and an OpenVEX document leave findings
/// out (an expired rule says so and no longer applies), `--quiet` leaves
/// standard error to errors.
#[tokio::test]
async fn scan_filters_and_exit_codes_follow_trivy_and_grype() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let db = advisory_db(&stack).await?;
    let registry = Registry::start().await?;
    let layers = vulnerable_app_layers(&[]);
    push_image(&registry, "acme/app", "2.0", &layers, image_config(&layers, &[])).await?;
    let image = format!("{}/acme/app:2.0", registry.addr);
    let cache = stack.dir.path().join("cache");
    let config = stack.write_config(
        "scan-cli.toml",
        &format!(
            "[scanner]\ncache_dir = \"{}\"\n[scanner.registry]\ninsecure = [\"{}\"]\n",
            cache.display(),
            registry.addr
        ),
    )?;
    let (config, db) =
        (config.to_str().unwrap_or_default().to_owned(), db.to_str().unwrap_or_default().to_owned());
    let scan = |extra: Vec<String>| {
        let mut args = vec![
            "--config".to_owned(),
            config.clone(),
            "scan".to_owned(),
            image.clone(),
            "--db".to_owned(),
            db.clone(),
        ];
        args.extend(extra);
        let stack = &stack;
        async move { stack.cli(&args.iter().map(String::as_str).collect::<Vec<_>>()).await }
    };
    let words = |s: &[&str]| s.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();

    // What the image has, unfiltered.
    let all = scan(words(&["--format", "json"])).await?;
    assert_eq!(all.code, Some(0), "{}", all.stderr);
    let doc: serde_json::Value = serde_json::from_str(&all.stdout)?;
    let findings: Vec<(String, Severity, bool)> = doc["assessments"][0]["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let severity = f["severity"].as_str().unwrap_or_default().parse().unwrap_or_default();
            let fixed = f["fixed_versions"].as_array().is_some_and(|v| !v.is_empty());
            (f["id"].as_str().unwrap_or_default().to_owned(), severity, fixed)
        })
        .collect();
    assert!(findings.len() >= 2, "{findings:?}");
    let present = findings[0].1;
    let absent = Severity::ALL
        .into_iter()
        .find(|s| findings.iter().all(|f| f.1 != *s))
        .context("a severity the image lacks")?;

    // --exit-code N with --severity: N only when such a finding remains.
    let out = scan(vec!["--exit-code".into(), "3".into(), "--severity".into(), present.to_string()]).await?;
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(out.stdout.contains(&findings[0].0), "{}", out.stdout);
    let out =
        scan(vec!["--exit-code".into(), "3".into(), "--severity".into(), absent.to_string().to_uppercase()])
            .await?;
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("left out") && out.stderr.contains("by --severity"), "{}", out.stderr);
    // An error is 1, whatever --exit-code says.
    let missing = stack
        .cli(&[
            "--config",
            &config,
            "scan",
            &format!("{}/acme/gone:1", registry.addr),
            "--db",
            &db,
            "--exit-code",
            "3",
        ])
        .await?;
    assert_eq!(missing.code, Some(1), "{}", missing.stderr);

    // --ignore-unfixed leaves out exactly the findings without a fix.
    let unfixed = findings.iter().filter(|f| !f.2).count();
    let out = scan(words(&["--ignore-unfixed", "--format", "json"])).await?;
    let kept = serde_json::from_str::<serde_json::Value>(&out.stdout)?["assessments"][0]["findings"]
        .as_array()
        .map(Vec::len);
    assert_eq!(kept, Some(findings.len() - unfixed));

    // An ignore file: a rule in force leaves its finding out, an expired one
    // does not and says so; a bad line is an error naming it.
    let ignore = stack.dir.path().join(".trivyignore");
    std::fs::write(
        &ignore,
        format!("# accepted: not reachable\n{}\n{} exp:2020-01-31 # old\n", findings[0].0, findings[1].0),
    )?;
    let out =
        scan(vec!["--ignorefile".into(), ignore.display().to_string(), "--format".into(), "json".into()])
            .await?;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let ids: Vec<String> =
        serde_json::from_str::<serde_json::Value>(&out.stdout)?["assessments"][0]["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["id"].as_str().map(str::to_owned))
            .collect();
    assert!(!ids.contains(&findings[0].0) && ids.contains(&findings[1].0), "{ids:?}");
    assert!(out.stderr.contains("has expired and no longer applies"), "{}", out.stderr);
    std::fs::write(&ignore, format!("{} maybe\n", findings[0].0))?;
    let out = scan(vec!["--ignorefile".into(), ignore.display().to_string()]).await?;
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("line 1") && out.stderr.contains("\"maybe\""), "{}", out.stderr);

    // OpenVEX: not_affected for the image leaves the finding out.
    let vex = stack.dir.path().join("app.vex.json");
    std::fs::write(
        &vex,
        serde_json::json!({
            "@context": "https://openvex.dev/ns/v0.2.0",
            "@id": "https://example.com/vex/app-1",
            "author": "acme security",
            "timestamp": "2026-12-01T00:00:00Z",
            "version": 1,
            "statements": [{
                "vulnerability": {"name": findings[1].0},
                "products": [{"@id": "pkg:oci/app"}],
                "status": "not_affected",
                "justification": "vulnerable_code_not_in_execute_path"
            }]
        })
        .to_string(),
    )?;
    let out = scan(vec![
        "--vex".into(),
        vex.display().to_string(),
        "--exit-code".into(),
        "5".into(),
        "--quiet".into(),
    ])
    .await?;
    assert_eq!(out.code, Some(5), "the other findings remain: {}", out.stderr);
    assert!(!out.stdout.contains(&findings[1].0), "{}", out.stdout);
    assert_eq!(out.stderr, "", "--quiet");

    // By default a CycloneDX BOM leaves the suppressed finding out, as the
    // other formats do; --show-suppressed keeps it with the VEX decision as
    // its analysis, and the exit status still counts only the others.
    let vex_arg = vex.display().to_string();
    let out = scan(words(&["--vex", &vex_arg, "--format", "cyclonedx"])).await?;
    let bom: serde_json::Value = serde_json::from_str(&out.stdout)?;
    let ids = |bom: &serde_json::Value| -> Vec<String> {
        bom["vulnerabilities"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["id"].as_str().map(str::to_owned))
            .collect()
    };
    assert!(!ids(&bom).contains(&findings[1].0), "{:?}", ids(&bom));
    let out =
        scan(words(&["--vex", &vex_arg, "--format", "cyclonedx", "--show-suppressed", "--exit-code", "5"]))
            .await?;
    assert_eq!(out.code, Some(5), "{}", out.stderr);
    let bom: serde_json::Value = serde_json::from_str(&out.stdout)?;
    let shown: Vec<&serde_json::Value> = bom["vulnerabilities"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["id"] == findings[1].0.as_str())
        .collect();
    assert_eq!(shown.len(), 1, "{bom:#}");
    assert_eq!(shown[0]["analysis"]["state"], "not_affected");
    assert_eq!(shown[0]["analysis"]["justification"], "code_not_reachable");
    assert!(out.stderr.contains("--show-suppressed"), "{}", out.stderr);
    let sarif = scan(words(&["--vex", &vex_arg, "--format", "sarif", "--show-suppressed"])).await?;
    assert_eq!(sarif.code, Some(1), "only CycloneDX carries the decision: {}", sarif.stderr);
    Ok(())
}
