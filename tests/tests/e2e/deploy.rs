//! The deployment files in `deploy/`: every service has a systemd unit that
//! `systemd-analyze verify` accepts without a word (with the units' binary
//! paths pointed at this build's binaries), each hardened the same way, and
//! the NATS cluster configuration is one `nats-server` accepts, and the
//! PostgreSQL roles of `deploy/postgres/roles.sql` keep each service to its
//! own tables.

use std::path::Path;

use anyhow::Context as _;
use patchpilot_e2e::{binary, workspace_root};

/// Every service binary and the unit that runs it.
const UNITS: &[(&str, &str)] = &[
    ("patchpilot-planner.service", "patchpilot-planner"),
    ("patchpilot-scanner.service", "patchpilot-scanner"),
    ("patchpilot-controller.service", "patchpilot-controller"),
    ("patchpilot-sandbox.service", "patchpilot-sandbox-worker"),
    ("patchpilot-broker.service", "patchpilot-broker"),
    ("patchpilot-gateway.service", "patchpilot-gateway"),
    ("patchpilot-retro.service", "patchpilot-retro"),
    ("nats-server.service", "nats-server"),
];

fn nats_server() -> anyhow::Result<String> {
    std::env::var("PATCHPILOT_NATS_SERVER")
        .context("PATCHPILOT_NATS_SERVER is not set: run the tests through scripts/test")
}

#[test]
fn every_service_has_a_hardened_unit_that_systemd_accepts() -> anyhow::Result<()> {
    let dir = workspace_root().join("deploy/systemd");
    let mut found: Vec<String> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".service"))
        .collect();
    found.sort();
    let mut want: Vec<String> = UNITS.iter().map(|(u, _)| (*u).to_owned()).collect();
    want.sort();
    assert_eq!(found, want, "one unit per service, and nothing else");

    let scratch = tempfile::tempdir()?;
    for (unit, bin) in UNITS {
        let text = std::fs::read_to_string(dir.join(unit))?;
        // Hardening every unit carries; the sandbox worker alone keeps
        // write-execute memory (QEMU's TCG) and opens /dev/kvm, and says why.
        for key in [
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ProtectHome=yes",
            "PrivateTmp=yes",
            "LimitNOFILE=65536",
            "RestrictAddressFamilies=",
        ] {
            assert!(text.lines().any(|l| l.starts_with(key)), "{unit}: no {key}");
        }
        let user = text
            .lines()
            .find_map(|l| l.strip_prefix("User="))
            .with_context(|| format!("{unit}: no User="))?;
        assert_ne!(user, "root", "{unit} runs as root");
        if *unit == "patchpilot-sandbox.service" {
            assert!(
                text.contains("DeviceAllow=/dev/kvm rw") && text.contains("DevicePolicy=closed"),
                "{unit}"
            );
            assert!(!text.contains("MemoryDenyWriteExecute=yes"), "{unit}: TCG needs write-execute memory");
        } else {
            assert!(
                text.contains("MemoryDenyWriteExecute=yes") && text.contains("PrivateDevices=yes"),
                "{unit}"
            );
        }
        let path = if *bin == "nats-server" { nats_server()?.into() } else { binary(bin)? };
        let local = text.replace(&format!("/usr/local/bin/{bin} "), &format!("{} ", path.display()));
        assert_ne!(local, text, "{unit} runs /usr/local/bin/{bin}");
        let copy = scratch.path().join(unit);
        std::fs::write(&copy, local)?;
        verify(&copy)?;
    }
    Ok(())
}

fn verify(unit: &Path) -> anyhow::Result<()> {
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit)
        .output()
        .context("running systemd-analyze (Debian's systemd package)")?;
    // verify exits 0 on settings it ignores; anything it says is a defect.
    anyhow::ensure!(
        out.status.success() && out.stderr.is_empty() && out.stdout.is_empty(),
        "systemd-analyze verify {}: {}{}",
        unit.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

#[test]
fn the_nats_cluster_configuration_is_valid_for_every_node() -> anyhow::Result<()> {
    let conf = workspace_root().join("deploy/nats/nats.conf");
    let text = std::fs::read_to_string(&conf)?;
    assert_eq!(text.matches("nats-route://").count(), 3, "three routes: a three-node cluster");
    for node in ["nats-1", "nats-2", "nats-3"] {
        let out = std::process::Command::new(nats_server()?)
            .args(["-c", &conf.to_string_lossy(), "-t"])
            .env("NATS_SERVER_NAME", node)
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "{node}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// `deploy/postgres/roles.sql` as `deploy/README.md` runs it on a new
/// database: the roles, the schema migrated by its owner with a service's
/// `--migrate-only`, the grants. Each service's role then reaches its own
/// tables and is refused the others' (the full loop under these roles is
/// `one_trace::submit_planner_controller_sandbox_run_and_pr_are_one_trace`).
#[tokio::test]
async fn each_services_postgres_role_reaches_its_own_tables_and_no_others() -> anyhow::Result<()> {
    let db = patchpilot_e2e::TestDatabase::create().await?;
    let admin = sqlx::PgPool::connect(&db.url).await?;
    patchpilot_e2e::apply_roles(&admin).await?;
    let owner = patchpilot_e2e::url_as_role(&db.url, "patchpilot_owner")?;
    let migrated = patchpilot_e2e::run_binary(
        "patchpilot-planner",
        &["--migrate-only"],
        &[("PATCHPILOT_DATABASE__URL".into(), owner)],
    )
    .await?;
    assert_eq!(migrated.code, Some(0), "{}", migrated.stderr);
    assert!(migrated.stdout.contains("the schema is up to date"), "{}", migrated.stdout);
    patchpilot_e2e::apply_roles(&admin).await?;
    // Twice more: it is idempotent.
    patchpilot_e2e::apply_roles(&admin).await?;
    let owners: Vec<(String,)> =
        sqlx::query_as("SELECT DISTINCT tableowner::text FROM pg_tables WHERE schemaname = 'public'")
            .fetch_all(&admin)
            .await?;
    assert_eq!(owners, [("patchpilot_owner".to_owned(),)]);

    // (role, a table it writes, tables it must not read)
    let roles: &[(&str, &str, &[&str])] = &[
        (
            "patchpilot_planner",
            "remediation_jobs",
            &["controller_remediations", "broker_capabilities", "gateway_secrets"],
        ),
        (
            "patchpilot_controller",
            "controller_runs",
            &["remediation_jobs", "broker_calls", "gateway_secrets"],
        ),
        (
            "patchpilot_sandbox",
            "egress_decisions",
            &["controller_remediations", "broker_capabilities", "gateway_secrets"],
        ),
        (
            "patchpilot_broker",
            "broker_calls",
            &["gateway_secrets", "gateway_access_tokens", "controller_runs"],
        ),
        ("patchpilot_gateway", "gateway_refresh_leases", &["broker_capabilities", "remediations"]),
        ("patchpilot_retro", "retro_digests", &["broker_calls", "gateway_secrets", "egress_decisions"]),
    ];
    for (role, own, others) in roles {
        let pool = sqlx::PgPool::connect(&patchpilot_e2e::url_as_role(&db.url, role)?).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {own}")))
            .execute(&pool)
            .await
            .with_context(|| format!("{role} reading its {own}"))?;
        let can: (bool,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT has_table_privilege('{own}', 'INSERT') AND has_table_privilege('{own}', 'UPDATE')"
        )))
        .fetch_one(&pool)
        .await?;
        assert!(can.0, "{role} cannot write {own}");
        for other in *others {
            let refused = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT 1 FROM {other} LIMIT 1")))
                .execute(&pool)
                .await
                .expect_err(&format!("{role} read {other}"));
            assert_eq!(
                refused.as_database_error().and_then(|e| e.code()).as_deref(),
                Some("42501"),
                "{role} on {other}: {refused}"
            );
        }
        // No service changes the schema.
        let create = sqlx::query("CREATE TABLE intruder (x int)").execute(&pool).await;
        assert!(create.is_err(), "{role} created a table");
        pool.close().await;
    }
    // The operator's CLI reads everything and writes none of the services' state.
    let operator =
        sqlx::PgPool::connect(&patchpilot_e2e::url_as_role(&db.url, "patchpilot_operator")?).await?;
    for table in ["controller_remediations", "broker_calls", "egress_decisions", "remediations"] {
        sqlx::query(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}"))).execute(&operator).await?;
    }
    let write = sqlx::query("DELETE FROM controller_remediations").execute(&operator).await;
    assert!(write.is_err(), "the operator role deleted the controller's remediations");
    operator.close().await;
    admin.close().await;
    Ok(())
}

/// `deploy/ansible/`: `ansible-playbook` (ansible-core, which `scripts/services
/// tools` installs) accepts the playbook and lists its tasks without a
/// warning, and what its variables say of each service agrees with the
/// rest of `deploy/`: the unit exists and starts that binary as that user,
/// the database role is one `roles.sql` grants, and the metrics port is
/// the one Prometheus scrapes. Applying it needs systemd as PID 1 and
/// hosts to install on, which the test machine is not.
#[test]
fn the_ansible_playbook_is_accepted_and_agrees_with_the_units_roles_and_scrape_targets() -> anyhow::Result<()>
{
    let dir = workspace_root().join("deploy/ansible");
    let playbook = std::env::var("PATCHPILOT_ANSIBLE_PLAYBOOK").context(
        "PATCHPILOT_ANSIBLE_PLAYBOOK is not set: run the tests through scripts/test (scripts/services tools installs ansible-core)",
    )?;
    let mut listed = String::new();
    for check in ["--syntax-check", "--list-tasks"] {
        let out = std::process::Command::new(&playbook)
            .args([check, "-i", "inventory.example.ini", "site.yml"])
            .current_dir(&dir)
            .output()
            .with_context(|| format!("running {playbook}"))?;
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "ansible-playbook {check}:\n{text}");
        assert!(
            !text.contains("[WARNING]") && !text.contains("[DEPRECATION"),
            "ansible-playbook {check}:\n{text}"
        );
        listed = text;
    }
    for play in
        ["NATS, a three-node cluster", "PostgreSQL, the roles and the schema", "The PatchPilot services"]
    {
        assert!(listed.contains(play), "no play {play:?} in:\n{listed}");
    }

    let vars = std::fs::read_to_string(dir.join("group_vars/all.yml"))?;
    let vars = yaml_rust2::YamlLoader::load_from_str(&vars)?;
    let services = vars[0]["patchpilot_services"].as_hash().context("patchpilot_services")?;
    let roles = std::fs::read_to_string(workspace_root().join("deploy/postgres/roles.sql"))?;
    let prometheus = std::fs::read_to_string(workspace_root().join("deploy/prometheus/prometheus.yml"))?;
    let mut units = Vec::new();
    for (name, service) in services {
        let name = name.as_str().context("a service name")?;
        let field = |key: &str| service[key].as_str().map(str::to_owned);
        let (binary_name, unit, user) = (
            field("binary").context("binary")?,
            field("unit").context("unit")?,
            field("user").context("user")?,
        );
        let text = std::fs::read_to_string(workspace_root().join("deploy/systemd").join(&unit))
            .with_context(|| format!("{name}: unit {unit}"))?;
        assert!(
            text.contains(&format!("ExecStart=/usr/local/bin/{binary_name} ")),
            "{unit} does not start {binary_name}"
        );
        assert!(text.contains(&format!("\nUser={user}\n")), "{unit} does not run as {user}");
        binary(&binary_name).with_context(|| format!("{name}: no binary {binary_name}"))?;
        let role = field("db_role").unwrap_or_default();
        assert!(role.is_empty() || roles.contains(&format!("'{role}'")), "{name}: roles.sql has no {role}");
        let port = service["metrics_port"].as_i64().context("metrics_port")?;
        let job = prometheus
            .split("- job_name: ")
            .find(|job| job.starts_with(&format!("patchpilot-{name}\n")))
            .with_context(|| format!("prometheus.yml has no job patchpilot-{name}"))?;
        assert!(
            job.contains(&format!(":{port}\"")),
            "patchpilot-{name} is scraped elsewhere than :{port}:\n{job}"
        );
        units.push(unit);
    }
    for (unit, _) in UNITS.iter().filter(|(u, _)| *u != "nats-server.service") {
        assert!(units.iter().any(|u| u == unit), "the playbook installs no {unit}");
    }
    Ok(())
}
