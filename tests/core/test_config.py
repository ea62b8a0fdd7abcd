"""Settings: flag > environment > config file > default; bad config names key and file."""

import os
from datetime import timedelta

import pytest

from forensics.config import FLYTECTL_VARS, Secret, flytekit_config_file, load_settings
from forensics.errors import ConfigError


def write(tmp_path, text, name="elastic-audit.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_defaults_without_any_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings(env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert s.loki.url == "http://localhost:3100"
    assert s.loki.max_query_length == timedelta(hours=721) and s.loki.shard == timedelta(hours=24)
    assert s.flyte.domains == ("development", "staging", "production")
    assert s.config_path is None


def test_precedence_flag_over_env_over_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = write(tmp_path, '[loki]\nurl = "http://file:3100"\norg_id = "file-org"\n')
    env = {"LOKI_ADDR": "http://env:3100", "LOKI_ORG_ID": "env-org"}
    assert load_settings(config=cfg, env={}).loki.url == "http://file:3100"
    assert load_settings(config=cfg, env=env).loki.url == "http://env:3100"
    assert load_settings(config=cfg, env=env).loki.org_id == "env-org"
    assert (
        load_settings(config=cfg, env=env, loki_url="http://flag:3100").loki.url
        == "http://flag:3100"
    )


def test_local_file_then_xdg(tmp_path, monkeypatch):
    xdg = tmp_path / "xdg"
    (xdg / "elastic-audit").mkdir(parents=True)
    (xdg / "elastic-audit" / "config.toml").write_text("[scan]\nworkers = 3\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert load_settings(env={"XDG_CONFIG_HOME": str(xdg)}).workers == 3
    (work / "elastic-audit.toml").write_text("[scan]\nworkers = 5\n")
    assert load_settings(env={"XDG_CONFIG_HOME": str(xdg)}).workers == 5


def test_otel_label_names_and_checkpoint_settings(tmp_path):
    cfg = write(
        tmp_path,
        """
[loki]
namespace_label = "k8s_namespace_name"
pod_label = "k8s_pod_name"
container_label = "k8s_container_name"
shard = "6h"
[checkpoints]
template = "s3://bucket/checkpoints/{project}/{name}/"
""",
    )
    s = load_settings(config=cfg, env={})
    assert s.loki.pod_label == "k8s_pod_name" and s.loki.shard == timedelta(hours=6)
    assert s.checkpoints.template.endswith("{name}/")


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("[loki]\nnamespace_lable = 'ns'\n", "unknown key loki.namespace_lable"),
        ("[lokki]\nurl = 'x'\n", "unknown section [lokki]"),
        ("[loki]\nshard = 'soon'\n", "loki.shard must be a positive duration"),
        ("[scan]\nworkers = 0\n", "scan.workers must be a whole number"),
        ("[flyte]\ndomains = []\n", "flyte.domains must be a non-empty list"),
        ("[flyte]\nnamespace_template = '{project}'\n", "must contain {domain}"),
        ("[loki\nurl = 'x'\n", "TOML syntax error"),
    ],
)
def test_bad_config_names_key_and_file(tmp_path, text, fragment):
    cfg = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_settings(config=cfg, env={})
    assert fragment in str(e.value) and cfg in str(e.value)


def test_missing_config_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_settings(config=str(tmp_path / "nope.toml"), env={})


@pytest.mark.parametrize("var", ["ELASTIC_AUDIT_CONFIG", "FLYTECTL_CONFIG"])
def test_a_variable_naming_a_directory_says_it_is_one(tmp_path, monkeypatch, var):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        load_settings(env={var: str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)})
    assert str(e.value) == f"{var}={tmp_path}: is a directory, not a config file"


def test_a_variable_naming_a_fifo_says_what_it_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)  # never opened: reading it would wait for a writer
    with pytest.raises(ConfigError) as e:
        load_settings(env={"ELASTIC_AUDIT_CONFIG": str(fifo)})
    assert str(e.value) == f"ELASTIC_AUDIT_CONFIG={fifo}: is a FIFO, not a config file"


def test_a_variable_naming_a_missing_file_still_suspects_a_stopped_demo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gone = tmp_path / "gone" / "elastic-audit.toml"
    with pytest.raises(ConfigError) as e:
        load_settings(env={"ELASTIC_AUDIT_CONFIG": str(gone)})
    assert str(e.value).startswith(f"ELASTIC_AUDIT_CONFIG={gone}: no such file (left over from")


# pyflyte's override, the variable flytekit reads before FLYTECTL_CONFIG (configuration/file.py:22)
OVERRIDE = "_FLYTECTL_CONFIG_PYFLYTE_OVERRIDE"


def test_flytekits_override_variable_names_the_file_it_reads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    chosen, other = tmp_path / "chosen.yaml", tmp_path / "other.yaml"
    chosen.write_text("admin: {}\n")
    other.write_text("admin: {}\n")
    env = {OVERRIDE: str(chosen), "FLYTECTL_CONFIG": str(other), "HOME": str(tmp_path)}
    assert flytekit_config_file(env) == (str(chosen), OVERRIDE)


def test_a_missing_override_is_not_replaced_by_flytectl_config(tmp_path, monkeypatch):
    # flytekit ignores an override naming no file and searches on; FLYTECTL_CONFIG is not read.
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text("admin: {}\n")
    env = {OVERRIDE: str(tmp_path / "gone.yaml"), "FLYTECTL_CONFIG": str(other)}
    found, _ = flytekit_config_file({**env, "HOME": str(tmp_path)})
    assert found is None


def test_an_override_naming_a_missing_file_is_refused_by_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gone = tmp_path / "gone" / "config.yaml"
    with pytest.raises(ConfigError) as e:
        load_settings(env={OVERRIDE: str(gone), "XDG_CONFIG_HOME": str(tmp_path)})
    assert str(e.value).startswith(f"{OVERRIDE}={gone}: no such file")


def test_a_directory_is_not_counted_among_stale_variables(tmp_path, monkeypatch):
    # A stopped demo leaves files that are gone; a directory was named on purpose, by mistake.
    monkeypatch.chdir(tmp_path)
    gone = str(tmp_path / "gone" / "config.yaml")
    with pytest.raises(ConfigError) as e:
        load_settings(env={"ELASTIC_AUDIT_CONFIG": str(tmp_path), "FLYTECTL_CONFIG": gone})
    assert str(e.value) == f"ELASTIC_AUDIT_CONFIG={tmp_path}: is a directory, not a config file"


@pytest.mark.parametrize(
    "flag,said", [("config", "config file"), ("flyte_config", "Flyte config file")]
)
def test_a_flag_naming_a_directory_says_it_is_one(tmp_path, monkeypatch, flag, said):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        load_settings(env={"XDG_CONFIG_HOME": str(tmp_path)}, **{flag: str(tmp_path)})
    assert str(e.value) == f"{said} {tmp_path}: is a directory, not a config file"


def test_bearer_and_basic_together_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"LOKI_BEARER_TOKEN": "tok-SENTINEL", "LOKI_USERNAME": "u", "LOKI_PASSWORD": "p-SENTINEL"}
    with pytest.raises(ConfigError) as e:
        load_settings(env=env)
    assert "at most one of" in str(e.value)
    assert "SENTINEL" not in str(e.value)


def test_bearer_token_file_is_read_and_never_shown(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tok").write_text("sekrit-SENTINEL\n")
    s = load_settings(env={"LOKI_BEARER_TOKEN_FILE": str(tmp_path / "tok")})
    assert s.loki.bearer_token.value == "sekrit-SENTINEL"
    assert "SENTINEL" not in repr(s) and "SENTINEL" not in str(s.loki)


def test_secret_never_renders():
    s = Secret("hunter2")
    assert "hunter2" not in f"{s} {s!r} {[s]}"


def test_loki_max_entries_sets_the_page_limit_and_is_checked(tmp_path):
    assert load_settings(config=write(tmp_path, "[loki]\n"), env={}).loki.max_entries == 5000
    cfg = write(tmp_path, "[loki]\nmax_entries = 1000\n")
    assert load_settings(config=cfg, env={}).loki.max_entries == 1000
    for bad in ("50", "5001", '"1000"', "true", "1000.5"):
        cfg = write(tmp_path, f"[loki]\nmax_entries = {bad}\n")
        with pytest.raises(ConfigError) as e:
            load_settings(config=cfg, env={})
        assert "loki.max_entries" in str(e.value) and cfg in str(e.value)


def test_config_lists_every_field_of_the_settings_model_with_its_origin(
    tmp_path, monkeypatch, capsys
):
    # Issue 43 item 7: `config` derives its rows from the settings model, so every section
    # ([k8s_events], [prometheus], ...) and every key is shown; the flytectl file read through
    # FLYTECTL_CONFIG is named; each secret names the variable or URL it came from.
    import json
    from dataclasses import fields, is_dataclass

    from support.cli import run

    from forensics.config import Settings

    flytectl = tmp_path / "flytectl.yaml"
    flytectl.write_text("admin:\n  endpoint: dns:///127.0.0.1:9\n  insecure: true\n")
    (tmp_path / "elastic-audit.toml").write_text(
        '[k8s_events]\nenabled = true\n[prometheus]\nurl = "http://p:promsecret1@prom:9090"\n'
    )
    monkeypatch.chdir(tmp_path)
    for var in ("FLYTE_PLATFORM_URL", *FLYTECTL_VARS, "ELASTIC_AUDIT_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("FLYTECTL_CONFIG", str(flytectl))
    monkeypatch.setenv("LOKI_USERNAME", "auditor")
    monkeypatch.setenv("LOKI_PASSWORD", "lokisecret1")
    code, out, err = run(["config", "-o", "json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    model = Settings()
    expected = set()
    for top in fields(model):
        value = getattr(model, top.name)
        if top.name in ("config_path", "origins"):
            continue
        if not is_dataclass(value):
            expected.add(top.name)
            continue
        for f in fields(value):
            name = {"config_file": "config"}.get(f.name, f.name)
            if f.name != "domains_configured":  # said by flyte.domains' origin
                expected.add(f"{top.name}.{name}")
    assert expected <= set(doc), sorted(expected - set(doc))
    assert doc["flyte.config"] == {"value": str(flytectl), "from": "FLYTECTL_CONFIG"}
    assert doc["loki.password"] == {"value": "***", "from": "LOKI_PASSWORD"}
    assert doc["loki.username"] == {"value": "auditor", "from": "LOKI_USERNAME"}
    assert doc["k8s_events.enabled"]["from"] == "[k8s_events] enabled in elastic-audit.toml"
    assert doc["prometheus.url"] == {
        "value": "http://prom:9090",
        "from": "[prometheus] url in elastic-audit.toml",
    }
    assert doc["prometheus.password"]["value"] == "***"
    assert doc["prometheus.password"]["from"].startswith("user:password in [prometheus] url")
    assert "lokisecret1" not in out + err and "promsecret1" not in out + err


def test_a_url_user_password_becomes_basic_auth_however_the_settings_are_built(
    tmp_path, monkeypatch
):
    from forensics.config import LokiSettings, PrometheusSettings

    monkeypatch.chdir(tmp_path)
    url = "https://123456:glc_tok%2Fen@logs-prod.grafana.net/"
    env = {"LOKI_ADDR": url, "XDG_CONFIG_HOME": str(tmp_path)}
    for loki in (load_settings(env=env).loki, LokiSettings(url=url)):  # the CLI's and a library's
        assert loki.url.rstrip("/") == "https://logs-prod.grafana.net"
        assert (loki.username, loki.password) == ("123456", Secret("glc_tok/en"))
        assert "glc_tok" not in repr(loki)
    assert PrometheusSettings(url="http://p:pw1234@prom:9090").url == "http://prom:9090"
    with pytest.raises(ConfigError, match="one way"):
        load_settings(env={**env, "LOKI_BEARER_TOKEN": "other-token"})
    with pytest.raises(ConfigError, match="basic auth needs both") as e:
        load_settings(env={**env, "LOKI_ADDR": "https://glc_tok@logs-prod.grafana.net"})
    assert "glc_tok" not in str(e.value)
