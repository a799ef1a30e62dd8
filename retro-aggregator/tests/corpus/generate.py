#!/usr/bin/env python3
"""Generates the retrospective corpus for the retro-aggregator tests.

Writes retros.jsonl (one retrospective per line, as the fleet stores them)
and expected.tsv (run_id, family, category per line, same order) next to
this script. Deterministic: a fixed seed, no hash-ordered iteration, so
re-running gives byte-identical files.

    python3 generate.py

Families: 25 recurring problems, each with one expected category; every
problem run carries exactly one item of its family (in went_wrong,
missing_tools or missing_context), and 25 clean runs carry none.
Two families are rising (>= 70% in the last 7 days) and one is falling
(nothing in the last 14 days); see FAMILIES.
"""

import json
import math
import os
import random
import uuid
from datetime import datetime, timedelta, timezone

SEED = 20261205
HERE = os.path.dirname(os.path.abspath(__file__))

START = datetime(2026, 11, 1, tzinfo=timezone.utc)
END = datetime(2026, 12, 6, tzinfo=timezone.utc)  # exclusive
RECENT_7 = datetime(2026, 11, 29, tzinfo=timezone.utc)
RECENT_14 = datetime(2026, 11, 22, tzinfo=timezone.utc)

# ---------------------------------------------------------------- fleet

GH = "https://github.com/"

# (repository, distro, private, [(dockerfile, language), ...])
REPOS = [
    ("acme-corp/payments-api", "alpine", False, [("Dockerfile", "go"), ("deploy/docker/Dockerfile.prod", "go")]),
    ("acme-corp/ledger-service", "debian", True, [("Dockerfile", "go"), ("build/package/Dockerfile", "go")]),
    ("acme-corp/auth-gateway", "alpine", False, [("Dockerfile", "go")]),
    ("acme-corp/storefront-web", "alpine", False, [("Dockerfile", "node"), ("docker/Dockerfile.nginx", "node")]),
    ("acme-corp/checkout-ui", "debian", False, [("Dockerfile", "node")]),
    ("acme-corp/fraud-scoring", "debian", False, [("Dockerfile", "python"), ("deploy/docker/Dockerfile.prod", "python")]),
    ("acme-corp/legacy-billing", "alpine", False, [("Dockerfile", "java"), ("docker/Dockerfile.jre", "java")]),
    ("acme-corp/platform-monorepo", "alpine", False, [
        ("services/billing/Dockerfile", "go"), ("services/invoicing/Dockerfile", "go"),
        ("services/notifier/Dockerfile", "node"), ("services/gateway/Dockerfile", "go"),
        ("services/web/Dockerfile", "node"), ("images/base/Dockerfile", "go")]),
    ("northwind-labs/inventory-sync", "alpine", False, [("Dockerfile", "go"), ("cmd/inventory-sync/Dockerfile", "go")]),
    ("northwind-labs/edge-proxy", "debian", False, [("Dockerfile", "go")]),
    ("northwind-labs/admin-dashboard", "alpine", False, [("Dockerfile", "node")]),
    ("northwind-labs/etl-pipelines", "debian", False, [("docker/airflow/Dockerfile", "python"), ("docker/worker/Dockerfile", "python")]),
    ("northwind-labs/shipping-rates", "debian", False, [("Dockerfile", "ruby")]),
    ("globex/metrics-collector", "alpine", False, [("Dockerfile", "go")]),
    ("globex/k8s-operator", "debian", False, [("Dockerfile", "go")]),
    ("globex/notifications-service", "alpine", False, [("Dockerfile", "node"), ("deploy/Dockerfile.prod", "node")]),
    ("globex/ml-inference", "debian", False, [("Dockerfile", "python"), ("docker/Dockerfile.gpu", "python")]),
    ("globex/order-service", "debian", False, [("Dockerfile", "java")]),
    ("globex/services", "alpine", False, [
        ("services/orders/Dockerfile", "go"), ("services/pricing/Dockerfile", "go"),
        ("services/catalog/Dockerfile", "python"), ("services/recommendations/Dockerfile", "python"),
        ("base/Dockerfile.base", "go")]),
    ("initech/tps-reports", "alpine", False, [("Dockerfile", "go")]),
    ("initech/customer-portal", "debian", False, [("Dockerfile", "node"), ("frontend/Dockerfile", "node")]),
    ("initech/reporting-jobs", "alpine", False, [("Dockerfile", "python")]),
    ("initech/stapler-svc", "alpine", False, [("Dockerfile", "php"), ("docker/php-fpm/Dockerfile", "php")]),
    ("hooli/nucleus-api", "alpine", False, [("Dockerfile", "go"), ("deploy/docker/Dockerfile.prod", "go")]),
    ("hooli/piper-web", "alpine", False, [("Dockerfile", "node")]),
    ("hooli/search-indexer", "debian", False, [("Dockerfile", "python")]),
    ("hooli/platform", "alpine", False, [
        ("apps/api/Dockerfile", "go"), ("apps/web/Dockerfile", "node"),
        ("apps/worker/Dockerfile", "python"), ("apps/scheduler/Dockerfile", "go"),
        ("tools/base-image/Dockerfile", "go")]),
    ("umbrella-io/telemetry-agent", "alpine", False, [("Dockerfile", "go"), ("build/Dockerfile.release", "go")]),
    ("umbrella-io/webhooks-relay", "alpine", False, [("Dockerfile", "node")]),
    ("umbrella-io/data-api", "debian", False, [("Dockerfile", "python")]),
    ("stark-industries/jarvis-frontend", "debian", False, [("Dockerfile", "node")]),
    ("stark-industries/analytics-worker", "alpine", False, [("Dockerfile", "python")]),
    ("stark-industries/suit-telemetry", "debian", True, [("Dockerfile", "rust")]),
    ("wayne-enterprises/risk-engine", "debian", True, [("Dockerfile", "python"), ("deploy/docker/Dockerfile.prod", "python")]),
    ("wayne-enterprises/batcomputer-api", "alpine", False, [("Dockerfile", "go")]),
    ("wayne-enterprises/gotham-events", "alpine", False, [("Dockerfile", "node")]),
    ("cyberdyne/skynet-scheduler", "debian", False, [("Dockerfile", "go")]),
    ("cyberdyne/t800-firmware-builder", "debian", False, [("tools/builder/Dockerfile", "python")]),
    ("soylent-co/recipe-service", "alpine", False, [("Dockerfile", "java")]),
    ("tyrell-systems/replicant-registry", "alpine", False, [("Dockerfile", "go"), (".docker/Dockerfile.release", "go")]),
]
REPO = {r[0]: r for r in REPOS}
MONOREPOS = ["acme-corp/platform-monorepo", "hooli/platform", "globex/services"]

# --------------------------------------------------------------- catalog

DEPS = {
    "go": [
        ("golang.org/x/net", "v0.17.0", "v0.33.0", "CVE-2024-45338"),
        ("golang.org/x/net", "v0.19.0", "v0.23.0", "CVE-2023-45288"),
        ("golang.org/x/crypto", "v0.21.0", "v0.31.0", "CVE-2024-45337"),
        ("google.golang.org/grpc", "v1.58.2", "v1.58.3", "CVE-2023-44487"),
        ("google.golang.org/protobuf", "v1.32.0", "v1.33.0", "CVE-2024-24786"),
        ("github.com/golang-jwt/jwt/v4", "v4.5.0", "v4.5.2", "CVE-2025-30204"),
        ("github.com/docker/docker", "v24.0.7+incompatible", "v25.0.6+incompatible", "CVE-2024-41110"),
        ("github.com/opencontainers/runc", "v1.1.11", "v1.1.14", "CVE-2024-45310"),
        ("github.com/hashicorp/go-retryablehttp", "v0.7.4", "v0.7.7", "CVE-2024-6104"),
        ("github.com/Azure/azure-sdk-for-go/sdk/azidentity", "v1.5.1", "v1.6.0", "CVE-2024-35255"),
        ("golang.org/x/oauth2", "v0.18.0", "v0.27.0", "CVE-2025-22868"),
        ("github.com/go-jose/go-jose/v3", "v3.0.1", "v3.0.3", "CVE-2024-28180"),
    ],
    "node": [
        ("express", "4.19.2", "4.20.0", "CVE-2024-43796"),
        ("body-parser", "1.20.2", "1.20.3", "CVE-2024-45590"),
        ("path-to-regexp", "0.1.7", "0.1.12", "CVE-2024-52798"),
        ("cross-spawn", "7.0.3", "7.0.5", "CVE-2024-21538"),
        ("micromatch", "4.0.5", "4.0.8", "CVE-2024-4067"),
        ("braces", "3.0.2", "3.0.3", "CVE-2024-4068"),
        ("ws", "8.16.0", "8.17.1", "CVE-2024-37890"),
        ("axios", "1.6.8", "1.7.4", "CVE-2024-39338"),
        ("nanoid", "3.3.7", "3.3.8", "CVE-2024-55565"),
        ("@babel/traverse", "7.22.5", "7.23.2", "CVE-2023-45133"),
        ("cookie", "0.6.0", "0.7.0", "CVE-2024-47764"),
        ("tar", "6.1.15", "6.2.1", "CVE-2024-28863"),
    ],
    "python": [
        ("requests", "2.31.0", "2.32.0", "CVE-2024-35195"),
        ("urllib3", "2.2.1", "2.2.2", "CVE-2024-37891"),
        ("cryptography", "42.0.2", "42.0.4", "CVE-2024-26130"),
        ("cryptography", "43.0.3", "44.0.1", "CVE-2024-12797"),
        ("jinja2", "3.1.4", "3.1.5", "CVE-2024-56201"),
        ("certifi", "2024.2.2", "2024.7.4", "CVE-2024-39689"),
        ("idna", "3.6", "3.7", "CVE-2024-3651"),
        ("setuptools", "68.0.0", "70.0.0", "CVE-2024-6345"),
        ("werkzeug", "3.0.3", "3.0.6", "CVE-2024-49767"),
        ("starlette", "0.37.2", "0.40.0", "CVE-2024-47874"),
        ("gunicorn", "21.2.0", "22.0.0", "CVE-2024-1135"),
        ("aiohttp", "3.9.3", "3.9.4", "CVE-2024-30251"),
        ("pillow", "10.2.0", "10.3.0", "CVE-2024-28219"),
    ],
    "java": [
        ("com.fasterxml.jackson.core:jackson-databind", "2.13.4", "2.13.4.2", "CVE-2022-42003"),
        ("org.springframework:spring-web", "6.0.18", "6.0.19", "CVE-2024-22262"),
        ("ch.qos.logback:logback-core", "1.4.11", "1.4.14", "CVE-2023-6481"),
        ("org.apache.tomcat.embed:tomcat-embed-core", "10.1.24", "10.1.25", "CVE-2024-34750"),
    ],
    "ruby": [
        ("rack", "3.0.9", "3.0.9.1", "CVE-2024-26146"),
        ("nokogiri", "1.16.4", "1.16.5", "CVE-2024-34459"),
        ("rexml", "3.2.6", "3.3.9", "CVE-2024-49761"),
    ],
    "php": [
        ("guzzlehttp/guzzle", "7.4.4", "7.4.5", "CVE-2022-31090"),
        ("symfony/http-kernel", "6.4.13", "6.4.14", "CVE-2024-50340"),
        ("twig/twig", "3.11.0", "3.11.1", "CVE-2024-45411"),
    ],
    "rust": [
        ("h2", "0.3.24", "0.3.26", "CVE-2024-2653"),
        ("rustls", "0.21.10", "0.21.11", "CVE-2024-32650"),
        ("openssl", "0.10.64", "0.10.66", "CVE-2024-3296"),
    ],
}

LOCKFILE = {"go": "go.sum", "node": "package-lock.json", "python": "requirements.txt",
            "java": "pom.xml", "ruby": "Gemfile.lock", "php": "composer.lock", "rust": "Cargo.lock"}

OSPKG = {
    "alpine": [
        ("libssl3", "3.1.4-r5", "3.1.7-r1", "CVE-2024-9143"),
        ("libcrypto3", "3.1.4-r5", "3.1.7-r1", "CVE-2024-9143"),
        ("busybox", "1.36.1-r15", "1.36.1-r29", "CVE-2023-42363"),
        ("expat", "2.6.2-r0", "2.6.4-r0", "CVE-2024-50602"),
        ("curl", "8.9.0-r0", "8.11.1-r0", "CVE-2024-11053"),
        ("libxml2", "2.12.6-r0", "2.12.10-r0", "CVE-2024-56171"),
        ("musl", "1.2.4_git20230717-r4", "1.2.4_git20230717-r5", "CVE-2025-26519"),
        ("sqlite-libs", "3.45.3-r1", "3.45.3-r2", "CVE-2025-29087"),
        ("krb5-libs", "1.21.2-r0", "1.21.3-r0", "CVE-2024-37371"),
        ("c-ares", "1.27.0-r0", "1.34.5-r0", "CVE-2025-31498"),
    ],
    "debian": [
        ("libssl3", "3.0.13-1~deb12u1", "3.0.15-1~deb12u1", "CVE-2024-5535"),
        ("libexpat1", "2.5.0-1", "2.5.0-1+deb12u1", "CVE-2024-45490"),
        ("libc6", "2.36-9+deb12u4", "2.36-9+deb12u7", "CVE-2024-2961"),
        ("curl", "7.88.1-10+deb12u5", "7.88.1-10+deb12u8", "CVE-2024-2398"),
        ("libgnutls30", "3.7.9-2+deb12u2", "3.7.9-2+deb12u3", "CVE-2024-28834"),
        ("openssh-client", "1:9.2p1-2+deb12u2", "1:9.2p1-2+deb12u3", "CVE-2024-6387"),
    ],
}

# builder / toolchain images per language: (image, old tag, new tag, cve)
BASES = {
    "go": [
        ("golang", "1.22.3-alpine3.19", "1.22.5-alpine3.20", "CVE-2024-24790"),
        ("golang", "1.21.9-bookworm", "1.21.11-bookworm", "CVE-2024-24790"),
        ("golang", "1.22.6-alpine3.20", "1.22.7-alpine3.20", "CVE-2024-34156"),
        ("golang", "1.23.4-bookworm", "1.23.5-bookworm", "CVE-2024-45341"),
    ],
    "node": [
        ("node", "18.19.0-alpine3.18", "18.20.4-alpine3.20", "CVE-2024-27983"),
        ("node", "20.11.1-bookworm-slim", "20.18.1-bookworm-slim", "CVE-2024-36138"),
        ("node", "20.12.0-alpine3.19", "20.12.2-alpine3.19", "CVE-2024-27980"),
    ],
    "python": [
        ("python", "3.11.6-slim-bookworm", "3.11.10-slim-bookworm", "CVE-2024-6232"),
        ("python", "3.12.2-alpine3.19", "3.12.7-alpine3.20", "CVE-2024-4032"),
        ("python", "3.10.13-slim-bookworm", "3.10.15-slim-bookworm", "CVE-2024-7592"),
    ],
    "java": [
        ("eclipse-temurin", "17.0.10_7-jre-alpine", "17.0.13_11-jre-alpine", "CVE-2024-21147"),
        ("maven", "3.9.6-eclipse-temurin-17", "3.9.9-eclipse-temurin-17", "CVE-2024-21147"),
    ],
    "ruby": [("ruby", "3.2.2-slim-bookworm", "3.2.6-slim-bookworm", "CVE-2024-27280")],
    "php": [("php", "8.2.15-fpm-alpine3.19", "8.2.26-fpm-alpine3.20", "CVE-2024-8932")],
    "rust": [("rust", "1.76.0-slim-bookworm", "1.77.2-slim-bookworm", "CVE-2024-24576")],
}
RUNTIMES = {
    "alpine": [("alpine", "3.19.1", "3.20.3", "CVE-2024-9143"), ("nginx", "1.25.3-alpine", "1.27.3-alpine", "CVE-2024-7347")],
    "debian": [("debian", "bookworm-20240311-slim", "bookworm-20241111-slim", "CVE-2024-2961"),
               ("gcr.io/distroless/base-debian12", "nonroot", "nonroot", "CVE-2024-2961")],
}

MODELS = ["claude-sonnet-4-5", "claude-sonnet-4-5", "claude-sonnet-4-5", "gpt-5", "gpt-5",
          "claude-opus-4-1", "gpt-5-mini", "claude-haiku-4-5"]

# ------------------------------------------------------------- families

# label, expected category, where the item goes, count, trend
FAMILIES = [
    ("go_proxy_timeout", "infrastructure.network", "went_wrong", 18, None),
    ("npm_registry_econnreset", "infrastructure.network", "went_wrong", 12, None),
    ("pip_read_timeout", "infrastructure.network", "went_wrong", 9, None),
    ("apk_fetch_failed", "infrastructure.network", "went_wrong", 16, None),
    ("git_clone_permission_denied", "infrastructure.permissions", "went_wrong", 10, None),
    ("private_base_image_pull_denied", "infrastructure.permissions", "went_wrong", 8, None),
    ("dockerhub_rate_limited", "infrastructure.registry", "went_wrong", 15, "rising"),
    ("registry_manifest_unknown", "infrastructure.registry", "went_wrong", 6, None),
    ("vm_soft_lockup", "infrastructure.sandbox", "went_wrong", 7, None),
    ("dockerd_start_timeout", "infrastructure.sandbox", "went_wrong", 9, "falling"),
    ("vm_disk_full", "infrastructure.sandbox", "went_wrong", 8, None),
    ("monorepo_shared_base", "repository_complexity", "went_wrong", 17, None),
    ("multistage_builder_vuln", "repository_complexity", "went_wrong", 12, None),
    ("generated_dockerfile", "repository_complexity", "went_wrong", 6, None),
    ("vendored_dependencies", "repository_complexity", "went_wrong", 8, None),
    ("missing_make", "tooling", "missing_tools", 9, None),
    ("missing_golangci_lint", "tooling", "missing_tools", 5, None),
    ("missing_node_version_manager", "tooling", "missing_tools", 4, None),
    ("missing_release_branch", "context", "missing_context", 6, None),
    ("missing_internal_mirror", "context", "missing_context", 5, None),
    ("egress_denied_github_release", "policy", "went_wrong", 8, "rising"),
    ("vetting_rejected_workflow_edit", "policy", "went_wrong", 5, None),
    ("model_refused", "model.refusal", "went_wrong", 3, None),
    ("model_stuck_loop", "model.stuck", "went_wrong", 7, None),
    ("model_turn_or_token_limit", "model.limits", "went_wrong", 6, None),
]
N_CLEAN = 25

# languages a family can occur with (None: any)
FAMILY_LANGS = {
    "go_proxy_timeout": ["go"],
    "npm_registry_econnreset": ["node"],
    "pip_read_timeout": ["python"],
    "multistage_builder_vuln": ["go", "node", "java", "rust"],
    "vendored_dependencies": ["go", "php"],
    "missing_make": ["go", "rust", "php"],
    "missing_golangci_lint": ["go"],
    "missing_node_version_manager": ["node"],
}
FAMILY_DISTRO = {"apk_fetch_failed": "alpine"}
HOTSPOTS = {
    "git_clone_permission_denied": [("wayne-enterprises/risk-engine", 5), ("stark-industries/suit-telemetry", 3),
                                    ("acme-corp/ledger-service", 2)],
    "monorepo_shared_base": [("acme-corp/platform-monorepo", 8), ("hooli/platform", 6), ("globex/services", 3)],
    "private_base_image_pull_denied": [("acme-corp/ledger-service", 2), ("globex/k8s-operator", 2),
                                       ("hooli/nucleus-api", 2), ("initech/customer-portal", 1),
                                       ("umbrella-io/data-api", 1), ("cyberdyne/skynet-scheduler", 1)],
    "generated_dockerfile": [("umbrella-io/telemetry-agent", 2), ("globex/k8s-operator", 2),
                             ("northwind-labs/etl-pipelines", 1), ("tyrell-systems/replicant-registry", 1),
                             ("initech/reporting-jobs", 1)],
}

# what the agent itself tends to report, per expected category
REPORTED = {
    "infrastructure": [("infrastructure", 60), ("unspecified", 25), ("tooling", 9), ("repository_complexity", 6)],
    "repository_complexity": [("repository_complexity", 55), ("unspecified", 30), ("tooling", 15)],
    "tooling": [("tooling", 60), ("unspecified", 25), ("infrastructure", 15)],
    "context": [("unspecified", 50), ("repository_complexity", 35), ("policy", 15)],
    "policy": [("policy", 55), ("infrastructure", 30), ("unspecified", 15)],
    "model.refusal": [("policy", 60), ("unspecified", 40)],
    "model.stuck": [("repository_complexity", 40), ("tooling", 20), ("unspecified", 40)],
    "model.limits": [("unspecified", 50), ("repository_complexity", 50)],
}

OUTCOMES = {
    "go_proxy_timeout": [("infra_error", 45), ("agent_failed", 55)],
    "npm_registry_econnreset": [("infra_error", 45), ("agent_failed", 55)],
    "pip_read_timeout": [("infra_error", 45), ("agent_failed", 55)],
    "apk_fetch_failed": [("infra_error", 50), ("agent_failed", 50)],
    "git_clone_permission_denied": [("infra_error", 60), ("agent_failed", 40)],
    "private_base_image_pull_denied": [("agent_failed", 70), ("infra_error", 30)],
    "dockerhub_rate_limited": [("infra_error", 60), ("agent_failed", 40)],
    "registry_manifest_unknown": [("agent_failed", 80), ("infra_error", 20)],
    "vm_soft_lockup": [("infra_error", 60), ("timed_out", 40)],
    "dockerd_start_timeout": [("infra_error", 85), ("timed_out", 15)],
    "vm_disk_full": [("infra_error", 55), ("agent_failed", 45)],
    "egress_denied_github_release": [("agent_failed", 80), ("completed", 20)],
    "vetting_rejected_workflow_edit": [("agent_failed", 70), ("completed", 30)],
    "model_refused": [("agent_failed", 100)],
    "model_stuck_loop": [("agent_failed", 50), ("timed_out", 50)],
    "model_turn_or_token_limit": [("limit_exceeded", 100)],
}
DEFAULT_OUTCOME = {
    "repository_complexity": [("agent_failed", 55), ("completed", 45)],
    "tooling": [("agent_failed", 50), ("completed", 50)],
    "context": [("agent_failed", 45), ("completed", 55)],
}


# --------------------------------------------------------------- helpers

class G:
    """Random helpers bound to one seeded generator."""

    def __init__(self, rng):
        self.r = rng

    def choice(self, xs):
        return self.r.choice(xs)

    def weighted(self, pairs):
        total = sum(w for _, w in pairs)
        x = self.r.uniform(0, total)
        for v, w in pairs:
            x -= w
            if x <= 0:
                return v
        return pairs[-1][0]

    def hex(self, n):
        return "".join(self.r.choice("0123456789abcdef") for _ in range(n))

    def num(self, a, b):
        return self.r.randint(a, b)

    def uuid(self):
        return str(uuid.UUID(int=self.r.getrandbits(128), version=4))

    def ip(self, prefix):
        parts = prefix.split(".")
        while len(parts) < 4:
            parts.append(str(self.r.randint(1, 254)))
        return ".".join(parts)


def go_escape(path):
    return "".join("!" + c.lower() if c.isupper() else c for c in path)


def npm_tarball(pkg, ver):
    base = pkg.split("/")[-1]
    return f"https://registry.npmjs.org/{pkg}/-/{base}-{ver}.tgz"


def npm_meta(pkg):
    return "https://registry.npmjs.org/" + pkg.replace("/", "%2f")


def dur(g, outcome, rules):
    if outcome == "infra_error":
        ms = g.num(18_000, 470_000)
    elif outcome == "timed_out":
        ms = g.choice([1_800_000, 1_800_000, 2_700_000]) + g.num(150, 14_000)
    elif outcome == "limit_exceeded":
        ms = g.num(640_000, 2_350_000)
    elif outcome == "agent_failed":
        ms = g.num(95_000, 1_480_000)
    else:
        ms = g.num(170_000, 1_390_000)
    if rules and outcome not in ("timed_out",):
        ms = int(ms * g.r.uniform(0.25, 0.55))
    return ms


def rfc3339(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


# ----------------------------------------------------------- the context

class Ctx:
    """What one run was about: repository, Dockerfile, the finding."""

    def __init__(self, g, repo, dockerfile, purpose):
        self.g = g
        self.repo = repo
        self.url = GH + repo
        self.org, self.name = repo.split("/")
        _, self.distro, self.private, dfs = REPO[repo]
        self.df = dockerfile
        self.lang = dict(dfs)[dockerfile]
        self.purpose = purpose
        self.dep = g.choice(DEPS[self.lang])
        self.os = g.choice(OSPKG[self.distro])
        self.base = g.choice(BASES[self.lang])
        self.runtime = g.choice(RUNTIMES[self.distro])
        self.alpine = g.choice(["3.18", "3.19", "3.20", "3.21"])
        # which finding the run was about
        self.kind = g.weighted([("dep", 45), ("os", 30), ("base", 25)])

    @property
    def cve(self):
        return {"dep": self.dep, "os": self.os, "base": self.base}[self.kind][3]

    @property
    def bin(self):
        return self.name.split("-")[0] if self.g.r.random() < 0.5 else self.name

    def base_ref(self, new=False):
        img, old, nw, _ = self.base
        return f"{img}:{nw if new else old}"


def step(g, total=None):
    total = total or g.num(8, 18)
    return g.num(2, total - 1), total


# ------------------------------------------------------- family writers
# Each returns (item, summary). Wording varies; the root cause does not.

def f_go_proxy_timeout(g, c):
    c.kind = "dep"
    mod, old, new, cve = c.dep if c.lang == "go" else g.choice(DEPS["go"])
    esc = go_escape(mod)
    ip = g.ip(g.choice(["142.251", "142.250", "172.217", "216.58"]))
    k, n = step(g)
    secs = g.num(30, 300)
    bk = g.num(9, 21)
    item = g.choice([
        lambda: f"go mod download failed: {mod}@{new}: Get \"https://proxy.golang.org/{esc}/@v/{new}.mod\": dial tcp {ip}:443: i/o timeout",
        lambda: f"`go get {mod}@{new}` could not reach proxy.golang.org: net/http: TLS handshake timeout",
        lambda: f"#{bk} [builder {k}/{n}] RUN go mod download\n#{bk} ERROR: go: {mod}@{new}: Get \"https://proxy.golang.org/{esc}/@v/{new}.zip\": dial tcp [2607:f8b0:{g.hex(4)}:{g.hex(3)}::{g.hex(2)}]:443: i/o timeout",
        lambda: f"go: downloading {mod} {new}\ngo: {mod}@{new}: Get \"https://proxy.golang.org/{esc}/@v/list\": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)",
        lambda: f"Module proxy stopped answering: `go mod tidy` hung for {secs}s, then proxy.golang.org i/o timeout on {mod} {new}",
        lambda: f"docker build stage `builder` failed at `go mod download` (step {k}/{n}) — TLS handshake timeout to proxy.golang.org while fetching {mod}",
    ])()
    summary = g.choice([
        f"Bumped {mod} to {new} for {cve}, but the rebuild never finished because the Go module proxy kept timing out.",
        f"Could not verify the fix: every attempt to fetch Go modules from proxy.golang.org timed out during the builder stage.",
        f"The patch for {cve} is written but untested; go mod download could not reach the module proxy.",
        f"Go dependency downloads failed with timeouts against proxy.golang.org, so no verified change was produced.",
    ])
    return item, summary


def f_npm_registry_econnreset(g, c):
    c.kind = "dep"
    pkg, old, new, cve = c.dep if c.lang == "node" else g.choice(DEPS["node"])
    k, n = step(g)
    item = g.choice([
        lambda: f"npm ERR! code ECONNRESET\nnpm ERR! network request to {npm_meta(pkg)} failed, reason: read ECONNRESET",
        lambda: f"`npm ci` in stage deps (step {k}/{n}) aborted: npm ERR! network aborted while fetching {npm_tarball(pkg, new)} (ECONNRESET)",
        lambda: f"npm install {pkg}@{new} kept failing with `socket hang up` / read ECONNRESET from registry.npmjs.org ({g.num(2, 5)} attempts)",
        lambda: f"error An unexpected error occurred: \"https://registry.yarnpkg.com/{pkg}/-/{pkg.split('/')[-1]}-{new}.tgz: read ECONNRESET\".",
        lambda: f" ERR_PNPM_META_FETCH_FAIL  GET {npm_meta(pkg)}: request to {npm_meta(pkg)} failed, reason: read ECONNRESET",
        lambda: f"Connection to the npm registry was reset (ECONNRESET) while resolving {pkg}@{new}; package-lock.json was updated but `npm ci` never completed",
    ])()
    summary = g.choice([
        f"Updated {pkg} to {new} for {cve}; the image rebuild failed because the npm registry reset connections.",
        f"npm could not download packages (ECONNRESET from registry.npmjs.org), so the lockfile change was never verified.",
        f"Rebuild blocked: installs from the npm registry were repeatedly cut off with connection resets.",
    ])
    return item, summary


def f_pip_read_timeout(g, c):
    c.kind = "dep"
    pkg, old, new, cve = c.dep if c.lang == "python" else g.choice(DEPS["python"])
    whl = f"{pkg.replace('-', '_')}-{new}-py3-none-any.whl"
    path = f"/packages/{g.hex(2)}/{g.hex(2)}/{g.hex(60)}/{whl}"
    to = g.choice([15, 15, 15, 30, 60])
    item = g.choice([
        lambda: f"pip install failed: ReadTimeoutError: HTTPSConnectionPool(host='files.pythonhosted.org', port=443): Read timed out. (read timeout={to})",
        lambda: f"Downloading {whl} from files.pythonhosted.org timed out (read timeout={to}); `RUN pip install --no-cache-dir -r requirements.txt` exited 1",
        lambda: f"WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ReadTimeoutError(\"HTTPSConnectionPool(host='pypi.org', port=443): Read timed out. (read timeout={to})\")': /simple/{pkg}/",
        lambda: f"poetry install: HTTPSConnectionPool(host='files.pythonhosted.org', port=443): Read timed out while downloading {pkg} ({new})",
        lambda: f"error: Failed to download `{pkg}=={new}`\n  Caused by: Failed to fetch: `https://files.pythonhosted.org{path}`\n  Caused by: operation timed out",
    ])()
    summary = g.choice([
        f"Pinned {pkg}=={new} for {cve}, but pip timed out reading from PyPI during the image build.",
        f"Python package downloads from files.pythonhosted.org hit read timeouts, so the rebuilt image could not be checked.",
        f"The requirements bump is in place; verification failed because PyPI downloads kept timing out.",
    ])
    return item, summary


def f_apk_fetch_failed(g, c):
    c.kind = "os"
    pkg, old, new, cve = c.os if c.distro == "alpine" else g.choice(OSPKG["alpine"])
    av = c.alpine
    repo = g.choice(["main", "main", "community"])
    k, n = step(g)
    item = g.choice([
        lambda: f"WARNING: fetching https://dl-cdn.alpinelinux.org/alpine/v{av}/{repo}: temporary error (try again later)\nERROR: unable to select packages:\n  {pkg}-{new} (no such package)",
        lambda: f"`apk upgrade --no-cache {pkg}` failed: fetch https://dl-cdn.alpinelinux.org/alpine/v{av}/{repo}/x86_64/APKINDEX.tar.gz: network error",
        lambda: f"RUN apk add --no-cache {pkg}={new} (step {k}/{n}) exited 1: ERROR: {pkg}-{new}: network error (check Internet connection and firewall)",
        lambda: f"apk could not download APKINDEX from dl-cdn.alpinelinux.org (v{av}/{repo}, {g.num(2, 4)} tries, 'temporary error (try again later)'); {pkg} stayed at {old}",
        lambda: f"ERROR: https://dl-cdn.alpinelinux.org/alpine/v{av}/{repo}: temporary error (try again later) — 1 error; {g.num(14, 160)} distinct packages available",
    ])()
    summary = g.choice([
        f"Tried to upgrade {pkg} to {new} for {cve}; the Alpine package mirror could not be reached from the build.",
        f"apk fetches from dl-cdn.alpinelinux.org failed, so the OS package upgrade could not be applied or verified.",
        f"The Alpine repository index was unreachable during docker build; {cve} remains unfixed.",
    ])
    return item, summary


def f_git_clone_permission_denied(g, c):
    sha = g.hex(40)
    sub = g.choice(["proto", "third_party/schemas", "libs/common", "deploy/charts"])
    subrepo = g.choice(["internal-protos", "shared-schemas", "platform-common", "helm-charts"])
    item = g.choice([
        lambda: f"git clone git@github.com:{c.repo}.git failed: git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.",
        lambda: f"remote: Repository not found.\nfatal: repository 'https://github.com/{c.repo}.git/' not found",
        lambda: f"Checkout of {c.url} at {sha[:12]} failed with 'Repository not found' — the installation token cannot see this private repository",
        lambda: f"Cloning into '/workspace/{sub}'...\ngit@github.com: Permission denied (publickey).\nfatal: clone of 'git@github.com:{c.org}/{subrepo}.git' into submodule path '/workspace/{sub}' failed",
        lambda: f"fatal: could not read Username for 'https://github.com': terminal prompts disabled (private repo {c.repo}, no credentials in the sandbox)",
    ])()
    summary = g.choice([
        "Never got the source: cloning the repository was denied (private repository, no access for the sandbox credentials).",
        f"The run could not check out {c.repo}; git reported a permission / not-found error for the private repository.",
        "No work done — repository access was refused at clone time.",
    ])
    return item, summary


def f_private_base_image_pull_denied(g, c):
    c.kind = "base"
    img, old, new, _ = c.base
    reg = g.choice([
        f"ghcr.io/{c.org}/base-images",
        f"{g.num(100000000000, 999999999999)}.dkr.ecr.{g.choice(['us-east-1', 'eu-west-1', 'us-west-2'])}.amazonaws.com/platform",
        f"harbor.internal.{c.org}.io/base",
        f"registry.gitlab.com/{c.org}/containers",
    ])
    name = g.choice([f"{img}-builder", f"{img}", f"{img}-hardened", f"{c.lang}-base"])
    ref = f"{reg}/{name}:{new}"
    host = reg.split("/")[0]
    path = "/".join(reg.split("/")[1:] + [name])
    item = g.choice([
        lambda: f"docker build failed at FROM {ref}: pull access denied for {reg}/{name}, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
        lambda: f"failed to solve: {ref}: failed to resolve source metadata for {ref}: failed to authorize: failed to fetch oauth token: unexpected status from GET request to https://{host}/token?scope=repository%3A{path.replace('/', '%2F')}%3Apull&service={host}: 401 Unauthorized",
        lambda: f"The base image {ref} lives in a private registry and the sandbox has no credentials for {host}; the FROM line could not be pulled (denied: requested access to the resource is denied)",
        lambda: f"ERROR: failed to solve: {ref}: pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed",
        lambda: f"FROM {ref}: no basic auth credentials (private registry {host}, no login available in the VM)",
    ])()
    summary = g.choice([
        f"Could not build: the private base image from {host} was not pullable without registry credentials.",
        "The Dockerfile starts from an internal base image that the sandbox is not authorised to pull.",
        f"Pull of the private base {name} was denied, so nothing could be rebuilt or rescanned.",
    ])
    return item, summary


def f_dockerhub_rate_limited(g, c):
    if g.r.random() < 0.7 or "/" in c.runtime[0]:
        c.kind = "base"
        img, old, new, _ = c.base
    else:
        c.kind = "os"
        img, old, new, _ = c.runtime
    item = g.choice([
        lambda: f"toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit (pulling {img}:{new})",
        lambda: f"failed to resolve source metadata for docker.io/library/{img}:{new}: 429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit.",
        lambda: f"Docker Hub answered 429 for docker.io/library/{img}:{new} (anonymous pull limit, ratelimit-remaining: 0;w=21600); rebuild aborted",
        lambda: f"ERROR [internal] load metadata for docker.io/library/{img}:{new}: unexpected status from HEAD request to https://registry-1.docker.io/v2/library/{img}/manifests/{new}: 429 Too Many Requests",
        lambda: f"docker pull {img}:{new} → Error response from daemon: toomanyrequests: You have reached your pull rate limit",
    ])()
    summary = g.choice([
        f"Rebuild blocked by Docker Hub's pull rate limit on {img}:{new}.",
        "Docker Hub throttled the sandbox (HTTP 429 toomanyrequests), so the new base image could not be pulled.",
        f"The bump to {img}:{new} could not be verified; anonymous pulls from Docker Hub were rate limited.",
    ])
    return item, summary


def f_registry_manifest_unknown(g, c):
    c.kind = "base"
    img, old, new, _ = c.base
    ver, _, suffix = new.partition("-")
    parts = ver.split(".")
    parts[-1] = str(int(parts[-1].split("_")[0]) + g.num(4, 9)) if parts[-1].split("_")[0].isdigit() else parts[-1]
    bumped = ".".join(parts)
    bad = g.choice([
        f"{bumped}-{suffix}" if suffix else bumped,
        f"{ver}-alpine3.{g.choice([14, 15, 16])}",
        f"{ver}-{suffix.replace('bookworm', 'bookwork')}" if "bookworm" in suffix else f"{ver}-alpine3.{g.num(22, 24)}",
    ])
    arch = g.choice(["linux/arm64", "linux/amd64"])
    item = g.choice([
        lambda: f"Error response from daemon: manifest for {img}:{bad} not found: manifest unknown: manifest unknown",
        lambda: f"failed to solve: {img}:{bad}: failed to resolve source metadata for docker.io/library/{img}:{bad}: docker.io/library/{img}:{bad}: not found",
        lambda: f"Bumped FROM to {img}:{bad} but the registry returns MANIFEST_UNKNOWN for that tag (never published for {arch})",
        lambda: f"docker build: {img}:{bad}: manifest unknown — the tag suggested by the advisory does not exist on Docker Hub",
    ])()
    summary = g.choice([
        f"Chose the tag {img}:{bad}, which the registry does not have; the build failed at FROM.",
        "The new base image tag was not found in the registry (manifest unknown), so the bump could not be built.",
        f"Picked a non-existent tag for {img}; the pull returned manifest unknown.",
    ])
    return item, summary


def f_vm_soft_lockup(g, c):
    cpu = g.num(0, 3)
    secs = g.choice([22, 23, 26, 45, 48, 52, 67, 82])
    k, n = step(g)
    cmd = {"go": "go build -trimpath -o /out/app ./cmd/...", "node": "npm run build", "python": "pip install -r requirements.txt",
           "java": "mvn -B -q package -DskipTests", "rust": "cargo build --release", "ruby": "bundle install",
           "php": "composer install --no-dev"}[c.lang]
    item = g.choice([
        lambda: f"watchdog: BUG: soft lockup - CPU#{cpu} stuck for {secs}s! [dockerd:{g.num(300, 2400)}] during docker build; the guest stopped responding",
        lambda: f"Sandbox VM hung in stage builder (no output for {g.num(6, 25)} minutes); last console line: 'rcu: INFO: rcu_sched detected stalls on CPUs/tasks'",
        lambda: f"Guest became unresponsive during `docker build` (vsock heartbeat lost after {g.num(60, 600)}s); kernel log shows soft lockup on CPU#{cpu}",
        lambda: f"Build froze at step {k}/{n} (RUN {cmd}); VM console: 'BUG: soft lockup - CPU#{cpu} stuck for {secs}s! [buildkitd:{g.num(300, 2400)}]'",
    ])()
    summary = g.choice([
        "The microVM locked up in the middle of the image build, and the run was lost.",
        "Kernel soft lockup in the sandbox guest while building; nothing to report on the fix itself.",
        "The VM stopped responding during docker build (soft lockup), so the change was never verified.",
    ])
    return item, summary


def f_dockerd_start_timeout(g, c):
    secs = g.choice([30, 45, 60, 60, 90, 120])
    item = g.choice([
        lambda: f"dockerd did not become ready within {secs}s: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
        lambda: f"Docker daemon in the sandbox failed to start in time (waited {secs}s for /var/run/docker.sock); no build attempted",
        lambda: f"timed out waiting for dockerd: `docker info` kept returning 'Cannot connect to the Docker daemon' for {secs}s after boot",
        lambda: f"dockerd startup exceeded {secs}s (containerd socket /run/containerd/containerd.sock not ready); sandbox reported unhealthy",
    ])()
    summary = g.choice([
        "Docker never came up inside the VM, so no image could be built.",
        "The run ended before any work: the Docker daemon did not start within the allowed time.",
        "Sandbox startup failure — dockerd was not ready and every docker command failed.",
    ])
    return item, summary


def f_vm_disk_full(g, c):
    img, old, new, _ = c.base
    total = g.choice(["10G", "10G", "16G", "20G"])
    cache = {"go": ["root/go/pkg/mod", "root/.cache/go-build"], "node": ["app/node_modules", "root/.npm/_cacache"],
             "python": ["root/.cache/pip", "usr/local/lib/python3.11/site-packages"], "java": ["root/.m2/repository"],
             "ruby": ["usr/local/bundle/gems"], "php": ["app/vendor"], "rust": ["app/target/release/deps"]}[c.lang]
    tool = {"go": "go/pkg/tool/linux_amd64", "node": "lib/node_modules/npm", "python": "lib/python3.11/lib-dynload",
            "java": "openjdk/lib", "ruby": "lib/ruby/3.2.0", "php": "lib/php/extensions", "rust": "rustup/toolchains"}[c.lang]
    item = g.choice([
        lambda: f"docker build failed: write /var/lib/docker/overlay2/{g.hex(64)}/diff/{g.choice(cache)}/{g.hex(8)}: no space left on device",
        lambda: f"failed to register layer: write /usr/local/{tool}/{g.hex(6)}: no space left on device (while pulling {img}:{new})",
        lambda: f"Sandbox disk full ({total} of {total} used on /var/lib/docker) during the builder stage; writes failed with ENOSPC",
        lambda: f"ERROR: failed to solve: failed to copy: write /var/lib/docker/tmp/GetImageBlob{g.num(100000000, 999999999)}: no space left on device",
    ])()
    summary = g.choice([
        "The VM ran out of disk space while building the image.",
        f"Build aborted with ENOSPC — the sandbox's {total} Docker volume filled up before the final stage.",
        "No space left on device inside the sandbox; the rebuild could not finish.",
    ])
    return item, summary


def f_monorepo_shared_base(g, c):
    c.kind = "os"
    _, _, _, dfs = REPO[c.repo]
    base_df = dfs[-1][0]
    others = [d for d, _ in dfs if d != c.df and d != base_df]
    n = len(dfs) + g.num(3, 14)  # the repository has more than we list
    img, old, new, cve = c.base
    pkg, pold, pnew, pcve = c.os
    two = g.r.sample(others, 2) if len(others) >= 2 else others + [base_df]
    item = g.choice([
        lambda: f"{n} Dockerfiles inherit FROM ${{BASE_IMAGE}} built from {base_df}; unclear which one the finding refers to, so only {c.df} was bumped",
        lambda: f"The repository has {n} Dockerfiles sharing the internal base built from {base_df}; fixing {pcve} in {c.df} alone leaves the others vulnerable, while changing the shared base touches every service",
        lambda: f"Could not tell which Dockerfile to change: the finding names the image, but {two[0]}, {two[1]} and {base_df} all produce layers containing {pkg} {pold}",
        lambda: f"Monorepo layout: the base image is defined once in {base_df} and consumed by {n - 1} service Dockerfiles; bumping it means rebuilding all of them, beyond the build budget",
        lambda: f"Shared base ({base_df}) is referenced by {n} services through docker-bake.hcl targets; picking the right Dockerfile for {c.cve} took most of the run",
    ])()
    summary = g.choice([
        f"Ambiguous target in a monorepo: many Dockerfiles share {base_df}, and the finding did not say which to bump.",
        f"Patched {c.df} only; the same vulnerable base is shared by other services in the repository.",
        "Most of the run went into working out which of the monorepo's Dockerfiles owns the vulnerable layer.",
    ])
    return item, summary


def f_multistage_builder_vuln(g, c):
    img, old, new, cve = c.base
    rimg, rold, rnew, _ = c.runtime
    pkg, pold, pnew, pcve = c.dep
    binname = c.bin
    stage = g.choice(["builder", "build", "deps", "compile"])
    if c.lang == "node":
        shown = pcve
        c.kind = "dep"
        item = g.choice([
            lambda: f"Multi-stage Dockerfile: {pkg} {pold} arrives from the `{stage}` stage via COPY --from={stage} /app/node_modules; upgrading in the final stage changed nothing",
            lambda: f"Rescan still reports {pcve}: node_modules is installed in stage `{stage}` (FROM {img}:{old} AS {stage}) and copied into the runtime image unchanged",
            lambda: f"The vulnerable {pkg} {pold} is in the `{stage}` stage's node_modules, not in the runtime stage; bumping FROM {rimg}:{rnew} did not clear {pcve}",
        ])()
    else:
        item, shown = g.choice([
            (lambda: f"The vulnerable {pkg} {pold} is compiled into the binary in the `{stage}` stage ({img}:{old}), not the runtime stage; bumping the final FROM {rimg}:{rnew} did not clear {pcve}", pcve),
            (lambda: f"Rescan still reports {cve}: the fix belongs in stage `{stage}` (FROM {img}:{old} AS {stage}); the runtime stage only copies /out/{binname}", cve),
            (lambda: f"Bumped the runtime base, but the finding is in the toolchain baked into /usr/local/bin/{binname} at build time (stage 0, {img}:{old}); the builder image needed the bump instead", cve),
            (lambda: f"Finding {cve} comes from a binary built in `{stage}`; multi-stage build means the final image has no package manager to upgrade it in place", cve),
        ])
        item = item()
        c.kind = "dep" if shown == pcve else "base"
    summary = g.choice([
        "The vulnerable component is produced in a builder stage, so changing the final image did not fix the finding.",
        f"First attempt targeted the runtime stage; {shown} actually comes from the `{stage}` stage of the multi-stage build.",
        "Multi-stage build: the fix had to move to the build stage that compiles the artefact.",
    ])
    return item, summary


def f_generated_dockerfile(g, c):
    c.kind = "base"
    tmpl = g.choice(["build/Dockerfile.tmpl", "docker/Dockerfile.in", "templates/Dockerfile.j2", "hack/dockerfile.tpl"])
    target = g.choice(["dockerfile", "gen-dockerfiles", "render", "images"])
    vars_ = g.choice(["build/versions.mk", "images.yaml", "hack/versions.env", "docker/vars.json"])
    img, old, new, _ = c.base
    item = g.choice([
        lambda: f"{c.df} is generated by `make {target}` from {tmpl} (header: '# Code generated by gen-dockerfile; DO NOT EDIT.'); editing it directly would be overwritten",
        lambda: f"The Dockerfile is rendered from a Jinja template ({tmpl.rsplit('.', 1)[0]}.j2) by scripts/render-dockerfiles.py; the base tag {img}:{old} lives in {vars_}, not in {c.df}",
        lambda: f"{c.df} is produced by a Makefile target (`make {target}`) from {tmpl} with sed substitution of @BASE_IMAGE@; the FROM line exists only in the template",
        lambda: f"Edited {c.df}, then found CI regenerates it from {tmpl} + {vars_} and fails on the diff ('generated files are out of date')",
    ])()
    summary = g.choice([
        f"{c.df} is generated from a template; the real change had to go into {vars_} or the template.",
        "The Dockerfile is a generated artefact, so the obvious edit was in the wrong place.",
        f"Base image version is set in {vars_} and rendered into the Dockerfile; that was not obvious from the finding.",
    ])
    return item, summary


def f_vendored_dependencies(g, c):
    c.kind = "dep"
    mb = g.num(18, 240)
    files = g.num(40, 3100)
    if c.lang == "php":
        pkg, old, new, cve = c.dep
        item = g.choice([
            lambda: f"vendor/ is committed; bumping {pkg} in composer.lock without regenerating vendor/{pkg} leaves the old code in the image",
            lambda: f"composer install is not run in the Dockerfile (COPY vendor/ ./vendor/); updating {pkg} to {new} requires a {files}-file vendor/ diff",
        ])()
    else:
        mod, old, new, cve = c.dep
        item = g.choice([
            lambda: f"Bumped {mod} to {new} in go.mod, but the build uses -mod=vendor and vendor/modules.txt still lists {old}: 'go: inconsistent vendoring in /src'",
            lambda: f"go build: {mod}@{new}: is explicitly required in go.mod, but not marked as explicit in vendor/modules.txt — vendor/ must be regenerated with `go mod vendor`",
            lambda: f"The repository commits vendor/ (~{mb} MB); updating {mod} means regenerating vendor/ too, a {files}-file diff over the patch size limit",
            lambda: f"`go mod vendor` rewrote {files} files under vendor/ after the {mod} {old} -> {new} bump; unsure whether a vendored diff that large is acceptable",
        ])()
    summary = g.choice([
        f"Dependencies are vendored, so fixing {cve} needs the vendor/ tree updated as well as the manifest.",
        "The version bump alone does not build: the checked-in vendor directory is out of sync.",
        "Vendored dependencies turned a one-line bump into a very large change.",
    ])
    return item, summary


def f_missing_make(g, c):
    target = g.choice(["docker-build", "image", "build", "release-image", "bin/app"])
    tag = f"v{g.num(0, 4)}.{g.num(0, 30)}.{g.num(0, 9)}"
    item = g.choice([
        lambda: f"make: command not found while running `make {target}`",
        lambda: f"GNU make (the image build is driven by `make {target} IMAGE_TAG={tag}`)",
        lambda: f"make — needed for `make {target}`, which builds the binary the Dockerfile copies in",
        lambda: "make",
        lambda: f"`make` is not installed in the sandbox; could not run the repository's `make {target}` before docker build",
        lambda: "make (bash: make: command not found)",
    ])()
    summary = g.choice([
        f"The build goes through a Makefile, and make was not available in the sandbox.",
        "Could not run the repository's documented build because the make binary is missing.",
        f"Worked around the missing make by reading the Makefile by hand; `make {target}` itself could not run.",
    ])
    return item, summary


def f_missing_golangci_lint(g, c):
    ver = g.choice(["v1.59", "v1.59.1", "v1.60.3", "v1.61.0", "v1.55.2"])
    item = g.choice([
        lambda: f"golangci-lint {ver}",
        lambda: f"golangci-lint (the Dockerfile's test stage runs `golangci-lint run ./...`, pinned to {ver})",
        lambda: "golangci-lint: command not found — `make lint` is part of the pre-build checks",
        lambda: f"golangci-lint {ver} binary, to reproduce the lint job that failed after the go.mod bump",
    ])()
    summary = g.choice([
        "The repository's lint step needs golangci-lint, which the sandbox lacks.",
        f"Could not reproduce the CI lint failure locally without golangci-lint {ver}.",
        "Lint stage not runnable: no golangci-lint in the environment.",
    ])
    return item, summary


def f_missing_node_version_manager(g, c):
    pinned = g.choice(["18.20.4", "20.11.1", "16.20.2", "22.11.0"])
    have = g.choice(["20.18.1", "22.11.0", "18.19.0"])
    pnpm = g.choice(["8.15.4", "9.12.3", "9.1.0"])
    yarn = g.choice(["3.6.4", "4.1.0", "4.5.1"])
    item = g.choice([
        lambda: f"nvm (repository pins Node {pinned} in .nvmrc; the sandbox only has node v{have})",
        lambda: f"corepack — package.json declares \"packageManager\": \"pnpm@{pnpm}\" and `corepack enable` is unavailable",
        lambda: f"a Node version manager (nvm / fnm / volta) to honour .nvmrc = v{pinned}",
        lambda: f"corepack: command not found; yarn {yarn} (Berry) required by .yarnrc.yml",
    ])()
    summary = g.choice([
        "The project pins its Node toolchain via .nvmrc / packageManager, and no version manager was available.",
        "Could not reproduce the lockfile update with the pinned package manager version.",
        "Node toolchain mismatch: the required version manager (nvm or corepack) is not in the sandbox.",
    ])
    return item, summary


def f_missing_release_branch(g, c):
    major = g.num(1, 6)
    minor = g.num(0, 24)
    br = g.choice([f"release/{major}.{minor}", f"release-{major}.{minor}", f"v{major}.{minor}.x", f"stable/{major}.{minor}"])
    br2 = f"release/{major}.{minor - 1 if minor else minor + 1}"
    item = g.choice([
        lambda: f"Which release branch to target: the fix applies to main, but the deployed image is built from {br}",
        lambda: f"Whether to open the PR against main or the maintained branches ({br}, {br2}); the scanned image was built from a release branch",
        lambda: f"The supported release line for this image — tags v{major}.{minor}.x and v{major}.{minor + 1}.x both exist and the job did not say which one is affected",
        lambda: f"The target branch for the backport: SECURITY.md says security fixes land on release branches first ({br}), but none was named in the job",
    ])()
    summary = g.choice([
        f"Fixed it on main; unclear whether {br} also needs the change, as that is what ships.",
        "Not sure which release branch the fix belongs on; the job only named the default branch.",
        "The branch to target was ambiguous (main vs. maintained release branches).",
    ])
    return item, summary


def f_missing_internal_mirror(g, c):
    host = g.choice([f"artifactory.{c.org}.internal", f"nexus.corp.{c.org}.com", f"pkgs.{c.org}.net", f"mirror.{c.org}.local"])
    item = {
        "python": lambda: f"The internal package mirror URL (pip.conf sets index-url = https://{host}/api/pypi/pypi-remote/simple, unknown from the sandbox)",
        "node": lambda: f"Which Artifactory/Nexus mirror to use: .npmrc points the registry at https://{host}/api/npm/npm-remote/ and the build fails without it",
        "go": lambda: f"GOPROXY for the corporate mirror (https://{host}/go) that the Dockerfile expects as build arg GOPROXY",
        "java": lambda: f"Maven mirror URL: settings.xml references <mirror><url>https://{host}/maven2</url></mirror> that is not provided",
        "ruby": lambda: f"The gem source mirror (Gemfile uses source \"https://{host}/gems\") and how to reach it",
        "php": lambda: f"The private Packagist/Satis mirror at https://{host}/composer referenced in composer.json repositories",
        "rust": lambda: f"The crates mirror configured in .cargo/config.toml (registry = \"sparse+https://{host}/cargo/\")",
    }
    if c.distro == "alpine" and g.r.random() < 0.35:
        it = f"The internal Alpine mirror that /etc/apk/repositories is rewritten to at build time (ARG APK_MIRROR, default https://{host}/alpine)"
    else:
        it = item[c.lang]()
    summary = g.choice([
        "The build expects an internal package mirror whose address was not given.",
        f"Dependencies are meant to come from the company mirror ({host}); without its URL the build could not be reproduced.",
        "Missing configuration: the private mirror used by the Dockerfile is not part of the job.",
    ])
    return it, summary


TOOLS_GH = [
    ("krallin/tini", "v0.19.0", "tini-static-amd64"),
    ("grpc-ecosystem/grpc-health-probe", "v0.4.25", "grpc_health_probe-linux-amd64"),
    ("Yelp/dumb-init", "v1.2.5", "dumb-init_1.2.5_x86_64"),
    ("mikefarah/yq", "v4.44.3", "yq_linux_amd64"),
    ("tianon/gosu", "1.17", "gosu-amd64"),
    ("protocolbuffers/protobuf", "v28.3", "protoc-28.3-linux-x86_64.zip"),
    ("jqlang/jq", "jq-1.7.1", "jq-linux-amd64"),
    ("aquasecurity/trivy", "v0.56.2", "trivy_0.56.2_Linux-64bit.tar.gz"),
]


def f_egress_denied_github_release(g, c):
    repo, tag, asset = g.choice(TOOLS_GH)
    url = f"https://github.com/{repo}/releases/download/{tag}/{asset}"
    k, n = step(g)
    item = g.choice([
        lambda: f"Egress policy blocked {url} (CONNECT objects.githubusercontent.com:443 denied)",
        lambda: f"curl: (56) CONNECT tunnel failed, response 403 — downloading {repo.split('/')[1]} {tag} from GitHub releases is not on the sandbox egress allowlist",
        lambda: f"RUN wget -q {url} (step {k}/{n}) failed: proxy refused host objects.githubusercontent.com (not in egress allowlist)",
        lambda: f"The Dockerfile fetches {asset} from GitHub release assets; egress to release-assets.githubusercontent.com is denied, so the build stops at step {k}/{n}",
    ])()
    summary = g.choice([
        f"The build downloads {repo.split('/')[1]} from a GitHub release, which the egress policy does not allow.",
        "Blocked by egress policy: GitHub release downloads during docker build are denied.",
        f"Could not rebuild because fetching a release asset from github.com was refused by the sandbox allowlist.",
    ])
    return item, summary


def f_vetting_rejected_workflow_edit(g, c):
    c.kind = "base"
    wf = g.choice(["ci", "build", "docker-publish", "release", "test", "image"])
    ext = g.choice(["yml", "yml", "yaml"])
    img, old, new, _ = c.base
    item = g.choice([
        lambda: f"Vetting rejected the patch: it modifies .github/workflows/{wf}.{ext} (workflow files are outside the allowed change set)",
        lambda: f"vet: change to .github/workflows/{wf}.{ext} refused (rule: workflows are read-only); the CI container image pin lives there",
        lambda: f"Patch refused by vetting because it touched .github/workflows/{wf}.{ext} to bump `container: {img}:{old}` to {new}",
        lambda: f"The base image is also pinned in .github/workflows/{wf}.{ext}; vetting does not accept edits to workflow files, so that half of the fix was dropped",
    ])()
    summary = g.choice([
        "Part of the fix was in a GitHub Actions workflow, and vetting does not allow workflow changes.",
        f"Vetting blocked the edit to .github/workflows/{wf}.{ext}; only the Dockerfile change could be kept.",
        "The patch was refused because it modified CI workflow files.",
    ])
    return item, summary


def f_model_refused(g, c):
    pkg = c.dep[0] if c.kind == "dep" else c.os[0]
    variant = g.num(0, 2)
    c.kind = ["base", c.kind, c.kind][variant]
    item = [
        lambda: "I declined to change the base image, because altering security-relevant configuration without explicit human approval could violate the organisation's policies.",
        lambda: f"Stopped before editing: upgrading {pkg} could change cryptographic behaviour, which I am not comfortable doing autonomously.",
        lambda: "Did not apply the upgrade — I can't help with modifying or bypassing security controls in this repository.",
    ][variant]()
    summary = g.choice([
        "Refused to make the change, citing the need for human approval of security-sensitive edits.",
        "No patch: the agent declined the task on policy grounds instead of applying the bump.",
    ])
    return item, summary


def f_model_stuck_loop(g, c):
    c.kind = "dep"
    n = g.num(4, 19)
    k, tot = step(g)
    pkg, old, new, _ = c.dep
    file = {"go": "go.mod", "node": "package.json", "python": "requirements.txt", "java": "pom.xml",
            "ruby": "Gemfile", "php": "composer.json", "rust": "Cargo.toml"}[c.lang]
    item = g.choice([
        lambda: f"Applied the same edit to {file} {n} times; every rebuild failed with the identical error at step {k}/{tot}",
        lambda: f"Kept re-running `docker build -f {c.df} .` without changing anything after the same failure ({n} identical attempts)",
        lambda: f"Looped between bumping {pkg} to {new} and reverting it whenever the build failed; no progress after {n} iterations",
        lambda: f"Repeated the identical str_replace on line {g.num(3, 140)} of {c.df} {n} times; the tool answered 'old_str not found' every time",
    ])()
    summary = g.choice([
        "Went round in circles repeating the same edit and the same failing build.",
        f"Made no progress after {n} near-identical attempts; the run was spent retrying one step.",
        "Stuck in a retry loop instead of changing approach.",
    ])
    return item, summary


def f_model_turn_or_token_limit(g, c):
    c.kind = "dep"
    turns = g.choice([40, 50, 60, 80, 100])
    tk = g.choice([128, 200, 200, 272, 400])
    pkg, old, new, _ = c.dep
    item = g.choice([
        lambda: f"Reached the turn limit ({turns} turns) while still investigating why {pkg} stayed at {old}",
        lambda: f"Ran out of the token budget ({tk}k tokens) after reading the build logs; no patch written",
        lambda: f"Hit max_turns={turns} before the rescan could run",
        lambda: f"Context window exhausted at {tk}k tokens (a {g.num(4000, 60000)}-line `docker build` log was read in full)",
    ])()
    summary = g.choice([
        "Ran out of turns/tokens before finishing the remediation.",
        f"The run hit its budget limit ({turns} turns / {tk}k tokens) with the fix incomplete.",
        "Exceeded the model's run limits; the investigation took too long.",
    ])
    return item, summary


WRITERS = {name: globals()["f_" + name] for name, *_ in FAMILIES}

# ----------------------------------------------------------- went_well

def analysis_items(g, c):
    pkg, old, new, cve = c.dep
    opkg, oold, onew, ocve = c.os
    img, bold, bnew, bcve = c.base
    return [
        f"found {pkg} {old} in {LOCKFILE[c.lang]} as the source of {cve}" if c.kind == "dep" else
        f"traced {ocve} to {opkg} {oold} in the base layer" if c.kind == "os" else
        f"traced {bcve} to the toolchain in {img}:{bold}",
        f"reproduced the {c.cve} finding with the scanner before changing anything",
        f"identified the fixed version ({pkg} {new}) from the advisory" if c.kind == "dep" else
        f"identified the fixed package version {opkg} {onew}" if c.kind == "os" else
        f"identified {img}:{bnew} as the first tag with the fix",
        f"located the FROM line in {c.df} quickly",
    ]


def success_items(g, c):
    pkg, old, new, cve = c.dep
    opkg, oold, onew, ocve = c.os
    img, bold, bnew, bcve = c.base
    m, s = g.num(1, 14), g.num(0, 59)
    first = {
        "dep": f"{pkg} {old} -> {new} applied and {LOCKFILE[c.lang]} regenerated",
        "os": f"{opkg} upgraded to {onew} with a pinned package install",
        "base": f"base image bump from {img}:{bold} to {img}:{bnew} built",
    }[c.kind]
    return [
        first,
        f"rescan showed {c.cve} fixed",
        f"docker build -f {c.df} passed in {m}m{s:02d}s",
        "no new findings introduced by the change",
    ]


def repair_items(g, c):
    check = g.choice(["build-and-test", "docker-build", "ci / test (ubuntu-latest)", "integration", "lint"])
    return [f"reproduced the failing `{check}` check from the PR"]


def went_well(g, c, outcome, family, n_max=2):
    pool = list(analysis_items(g, c))
    if family in ("monorepo_shared_base", "multistage_builder_vuln", "generated_dockerfile"):
        pool = pool[:3]
    if outcome == "completed":
        pool += success_items(g, c)
    if c.purpose == "repair":
        pool += repair_items(g, c)
        if outcome == "completed":
            pool.append("kept the original fix while addressing the CI failure")
    k = g.weighted([(0, 25), (1, 45), (2, 30)]) if n_max == 2 else g.weighted([(1, 35), (2, 45), (3, 20)])
    if outcome == "completed" and k == 0:
        k = 1
    picked = g.r.sample(pool, min(k, len(pool)))
    return picked


def clean_summary(g, c):
    pkg, old, new, cve = c.dep
    opkg, oold, onew, ocve = c.os
    img, bold, bnew, bcve = c.base
    what = {
        "dep": f"Upgraded {pkg} from {old} to {new}",
        "os": f"Upgraded {opkg} to {onew}",
        "base": f"Bumped {img} from {bold} to {bnew}",
    }[c.kind]
    tail = g.choice([
        f"; rebuild and rescan confirm {c.cve} is fixed.",
        f"; the image from {c.df} builds and {c.cve} no longer shows up.",
        f". Build passed, {c.cve} resolved, PR opened.",
    ])
    if c.purpose == "repair":
        return g.choice([f"Repaired the PR's failing check; {what[0].lower() + what[1:]} is kept{tail}",
                         f"{what}; fixed the CI failure the first revision caused{tail}"])
    return what + tail


# -------------------------------------------------------------- planning

class Run:
    def __init__(self, family, category, where, date):
        self.family = family
        self.category = category
        self.where = where
        self.date = date
        self.repo = None
        self.df = None
        self.outcome = None
        self.purpose = "remediate"
        self.retry_of = None
        self.rem = None
        self.rev = None
        self.n = None


def stratified(g, count, start, end):
    span = (end - start).total_seconds()
    out = []
    for i in range(count):
        a = span * i / count
        b = span * (i + 1) / count
        out.append(start + timedelta(seconds=int(g.r.uniform(a, b - 1))))
    return out


def pick_dates(g, count, trend):
    if trend == "rising":
        recent = math.ceil(count * 0.78)
        return stratified(g, count - recent, START, RECENT_7) + stratified(g, recent, RECENT_7, END)
    if trend == "falling":
        return stratified(g, count, START, datetime(2026, 11, 20, tzinfo=timezone.utc))
    return stratified(g, count, START, END)


def candidates(family):
    langs = FAMILY_LANGS.get(family)
    distro = FAMILY_DISTRO.get(family)
    out = []
    for name, d, private, dfs in REPOS:
        if distro and d != distro:
            continue
        if name in MONOREPOS and not monorepo_allowed(family):
            continue
        pairs = [(df, lang) for df, lang in dfs if not langs or lang in langs]
        if name in MONOREPOS:
            pairs = [(df, lang) for df, lang in pairs if df != dfs[-1][0]]
        if pairs:
            out.append((name, pairs))
    return out


def monorepo_allowed(family):
    # monorepos also hit ordinary problems (network, sandbox), not only
    # their own
    return family in ("clean", "go_proxy_timeout", "npm_registry_econnreset", "pip_read_timeout",
                      "apk_fetch_failed", "dockerhub_rate_limited", "vm_soft_lockup",
                      "vm_disk_full", "missing_make", "model_turn_or_token_limit")


def assign_repos(g, family, runs):
    if family in HOTSPOTS:
        weights = HOTSPOTS[family]
        for run in runs:
            repo = g.weighted(weights)
            dfs = REPO[repo][3]
            if family == "monorepo_shared_base":
                pool = [d for d, _ in dfs[:-1]]
            else:
                pool = [d for d, _ in dfs]
            run.repo, run.df = repo, g.choice(pool)
        return
    cands = candidates(family)
    order = list(cands)
    g.r.shuffle(order)
    i = 0
    for run in runs:
        if i >= len(order):
            g.r.shuffle(order)
            i = 0
        name, pairs = order[i]
        i += 1
        run.repo, run.df = name, g.choice(pairs)[0]


def reported_category(g, expected):
    key = expected.split(".")[0] if expected.startswith("infrastructure") else expected
    return g.weighted(REPORTED[key])


def plan(g):
    runs = []
    for family, category, where, count, trend in FAMILIES:
        dates = pick_dates(g, count, trend)
        fam_runs = [Run(family, category, where, d) for d in dates]
        assign_repos(g, family, fam_runs)
        for r in fam_runs:
            r.outcome = g.weighted(OUTCOMES.get(family) or DEFAULT_OUTCOME[category])
        runs += fam_runs
    clean = [Run("clean", "none", None, d) for d in stratified(g, N_CLEAN, START, END)]
    assign_repos(g, "clean", clean)
    for r in clean:
        r.outcome = "completed"
    runs += clean

    trending = {f for f, *_rest, t in FAMILIES if t}
    infra_failed = [r for r in runs if r.category.startswith("infrastructure") and r.outcome == "infra_error"
                    and r.family not in trending]

    # a run after an infrastructure error is a retry in the same revision
    used = set()
    anchors = [r for r in infra_failed]
    g.r.shuffle(anchors)
    for r in clean[:8]:
        a = anchors.pop()
        used.add(id(a))
        r.retry_of = a
        r.repo, r.df = a.repo, a.df
        r.date = a.date + timedelta(seconds=g.num(150, 2700))
    # ...sometimes failing the same way again
    pairs_made = 0
    for fam in ["go_proxy_timeout", "apk_fetch_failed", "npm_registry_econnreset", "vm_soft_lockup", "pip_read_timeout"]:
        fr = [r for r in runs if r.family == fam and r.outcome == "infra_error" and id(r) not in used
              and r.retry_of is None]
        fr.sort(key=lambda r: r.date)
        if len(fr) >= 2 and pairs_made < 4:
            gaps = [(fr[i + 1].date - fr[i].date, i) for i in range(len(fr) - 1)]
            _, i = min(gaps)
            a, b = fr[i], fr[i + 1]
            used.add(id(a))
            used.add(id(b))
            b.retry_of = a
            b.repo, b.df = a.repo, a.df
            b.date = a.date + timedelta(seconds=g.num(200, 3000))
            pairs_made += 1

    # repair runs: forward fixes after a PR's checks failed
    for r in runs:
        if r.retry_of is None and id(r) not in used and g.r.random() < 0.14:
            r.purpose = "repair"

    # ids
    runs.sort(key=lambda r: (r.date, r.family, r.repo, r.df))
    max_n = {}
    history = []  # completed runs, for repair linking
    for r in runs:
        lang = dict(REPO[r.repo][3])[r.df]
        if r.retry_of is not None:
            a = r.retry_of
            r.rem, r.rev = a.rem, a.rev
        elif r.purpose == "repair":
            prev = [h for h in history if h.repo == r.repo and dict(REPO[h.repo][3])[h.df] == lang
                    and timedelta(minutes=25) < r.date - h.date < timedelta(days=9)]
            if prev and g.r.random() < 0.75:
                a = prev[-1]
                r.rem, r.rev, r.df = a.rem, a.rev, a.df
            else:
                r.rem, r.rev = g.uuid(), g.weighted([(1, 70), (2, 22), (3, 8)])
                max_n[(r.rem, r.rev)] = g.choice([1, 1, 2])
        else:
            r.rem, r.rev = g.uuid(), g.weighted([(1, 75), (2, 18), (3, 7)])
            if g.r.random() < 0.08:
                max_n[(r.rem, r.rev)] = 1
        r.n = max_n.get((r.rem, r.rev), 0) + 1
        max_n[(r.rem, r.rev)] = r.n
        if r.outcome == "completed":
            history.append(r)
    return runs


# -------------------------------------------------------------- writing

def render(g, r):
    c = Ctx(g, r.repo, r.df, r.purpose)
    is_model_family = r.family.startswith("model_")
    if is_model_family:
        model = g.choice(MODELS)
    else:
        model = "rules" if g.r.random() < 0.37 else g.choice(MODELS)
    ww, mt, mc, wrong = [], [], [], []
    if r.family == "clean":
        well = went_well(g, c, "completed", "clean", n_max=3)
        summary = clean_summary(g, c)
        category = "unspecified"
    else:
        item, summary = WRITERS[r.family](g, c)
        {"went_wrong": wrong, "missing_tools": mt, "missing_context": mc}[r.where].append(item)
        well = went_well(g, c, r.outcome, r.family)
        category = reported_category(g, r.category)
    return {
        "run_id": f"{r.rem}-r{r.rev}-{r.n}",
        "remediation_id": r.rem,
        "repository": c.url,
        "dockerfile": r.df,
        "purpose": r.purpose,
        "outcome": r.outcome,
        "model": model,
        "duration_ms": dur(g, r.outcome, model == "rules"),
        "created_at": rfc3339(r.date),
        "category": category,
        "summary": summary,
        "went_well": well,
        "went_wrong": wrong,
        "missing_tools": mt,
        "missing_context": mc,
    }


def main():
    g = G(random.Random(SEED))
    runs = plan(g)
    rows = [render(g, r) for r in runs]
    ids = [row["run_id"] for row in rows]
    assert len(ids) == len(set(ids)), "run ids must be unique"
    with open(os.path.join(HERE, "retros.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    with open(os.path.join(HERE, "expected.tsv"), "w", encoding="utf-8", newline="\n") as f:
        f.write("run_id\tfamily\tcategory\n")
        for r, row in zip(runs, rows):
            f.write(f"{row['run_id']}\t{r.family}\t{r.category}\n")


if __name__ == "__main__":
    main()
