"""Behaviour of ov_agent_ext.config: defaults, sources and their precedence, validation, secrets,
and save_config. Every test runs in the isolated HOME/XDG dirs of the autouse fixture."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import platformdirs
import pytest
from pydantic import SecretStr, ValidationError

from ov_agent_ext.config import (
    CONFIG_ENV,
    OVConfig,
    default_config_path,
    env_var_for,
    load_config,
    save_config,
)
from ov_agent_ext.errors import ConfigError

SECRET = "sk-ov-T0PS3CRET-5f2a9c"


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def cfg_file(tmp_path: Path) -> Path:
    return tmp_path / "project" / "config.json"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ---------------------------------------------------------------------------------------------
# Defaults

SPEC_DEFAULTS: dict[str, Any] = {
    "enabled": True,
    "endpoint": "http://127.0.0.1:1933",
    "apiKey": "",
    "account": "",
    "user": "",
    "agentId": "pi",
    "peerId": "",
    "syncTurns": True,
    "recallBudget": 2000,
    "recallMaxContentChars": 500,
    "recallPreferAbstract": True,
    "recallLimit": 6,
    "recallScoreThreshold": 0.5,
    "recallMinQueryLength": 3,
    "profileBudget": 10000,
    "resumeContextBudget": 2000,
    "indexBudget": 2000,
    "commitTokenThreshold": 20000,
    "commitOnShutdown": True,
    "captureToolResults": False,
    "captureMode": "semantic",
    "captureMaxLength": 24000,
    "captureAssistantTurns": True,
    "mirrorMemoryWrites": True,
    "writeQueueFlushInterval": 5000,
    "writeQueueFlushThreshold": 5,
    "bypassPatterns": [],
    "logLevel": "error",
    "healthTimeout": 5,
    "readTimeout": 10,
    "writeTimeout": 30,
    "connectTimeout": 3,
    "recallTimeout": 3,
    "incognito": False,
    "commitTimeout": 20,
    "memoryFile": ".memory/MEMORY.md",
    "tokenizer": "auto",
}


def test_defaults_match_design_spec() -> None:
    config = load_config(environ={})
    shown = config.display()
    # Every documented key, and nothing else (stateDir depends on the machine; checked below).
    assert set(shown) == set(SPEC_DEFAULTS) | {"stateDir"}
    for key, expected in SPEC_DEFAULTS.items():
        value, source = shown[key]
        assert value == expected, key
        if isinstance(expected, bool):
            assert value is expected, key
        assert source == "default", key
    assert config.api_key.get_secret_value() == ""
    assert config.agent_id == "pi"
    assert config.recall_score_threshold == 0.5
    assert config.health_timeout == 5.0
    assert config.read_timeout == 10.0
    assert config.write_timeout == 30.0


def test_default_state_dir_is_the_user_state_dir() -> None:
    config = load_config(environ={})
    assert config.state_dir == platformdirs.user_state_path("ov-agent-ext")
    assert config.source_of("state_dir") == "default"


def test_model_constructed_directly_has_the_same_defaults() -> None:
    assert OVConfig().display() == load_config(environ={}).display()


def test_missing_default_config_file_is_not_an_error() -> None:
    assert not default_config_path().exists()
    assert load_config(environ={}).recall_budget == 2000


def test_config_is_frozen() -> None:
    config = load_config(environ={})
    with pytest.raises(ValidationError):
        config.recall_budget = 1  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Sources and precedence


def test_file_overrides_defaults(cfg_file: Path) -> None:
    write_json(cfg_file, {"recallBudget": 1500, "captureMode": "keyword"})
    config = load_config(cfg_file, environ={})
    assert config.recall_budget == 1500
    assert config.capture_mode == "keyword"
    assert config.source_of("recall_budget") == str(cfg_file)
    assert config.recall_limit == 6
    assert config.source_of("recall_limit") == "default"


def test_env_overrides_file(cfg_file: Path) -> None:
    write_json(cfg_file, {"recallBudget": 1500, "endpoint": "http://file-host:1933"})
    env = {"OV_AGENT_EXT_RECALL_BUDGET": "1200", "OPENVIKING_URL": "http://env-host:1933"}
    config = load_config(cfg_file, environ=env)
    assert config.recall_budget == 1200
    assert config.source_of("recall_budget") == "OV_AGENT_EXT_RECALL_BUDGET"
    assert config.endpoint == "http://env-host:1933"
    assert config.source_of("endpoint") == "OPENVIKING_URL"


def test_explicit_overrides_env(cfg_file: Path) -> None:
    write_json(cfg_file, {"recallBudget": 1500})
    env = {"OV_AGENT_EXT_RECALL_BUDGET": "1200", "OPENVIKING_AGENT_ID": "env-agent"}
    config = load_config(cfg_file, environ=env, recall_budget=900, agentId="arg-agent")
    assert config.recall_budget == 900
    assert config.agent_id == "arg-agent"
    assert config.source_of("recall_budget") == "argument"
    assert config.source_of("agent_id") == "argument"


def test_process_environment_is_used_when_environ_is_not_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENVIKING_URL", "http://from-process-env:1933")
    monkeypatch.setenv("OV_AGENT_EXT_RECALL_LIMIT", "9")
    config = load_config()
    assert config.endpoint == "http://from-process-env:1933"
    assert config.recall_limit == 9
    # An explicit environ replaces the process environment entirely.
    assert load_config(environ={}).recall_limit == 6


def test_config_path_argument_beats_env_var_path(tmp_path: Path) -> None:
    from_env = write_json(tmp_path / "env" / "config.json", {"recallLimit": 2})
    from_arg = write_json(tmp_path / "arg" / "config.json", {"recallLimit": 3})
    config = load_config(from_arg, environ={CONFIG_ENV: str(from_env)})
    assert config.recall_limit == 3
    assert config.source_of("recall_limit") == str(from_arg)


def test_env_var_path_beats_default_config_path(tmp_path: Path) -> None:
    write_json(default_config_path(), {"recallLimit": 2})
    from_env = write_json(tmp_path / "env" / "config.json", {"recallLimit": 4})
    config = load_config(environ={CONFIG_ENV: str(from_env)})
    assert config.recall_limit == 4
    assert config.source_of("recall_limit") == str(from_env)


def test_default_config_path_used_when_present() -> None:
    path = default_config_path()
    assert path == Path(os.environ["XDG_CONFIG_HOME"]) / "ov-agent-ext" / "config.json"
    write_json(path, {"recallLimit": 7, "logLevel": "debug"})
    config = load_config(environ={})
    assert config.recall_limit == 7
    assert config.log_level == "debug"
    assert config.source_of("recall_limit") == str(path)


def test_path_argument_expands_user(isolated_environment: Path) -> None:
    write_json(isolated_environment / "my-ov.json", {"recallLimit": 8})
    assert load_config("~/my-ov.json", environ={}).recall_limit == 8


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError) as info:
        load_config(missing, environ={})
    assert str(missing) in str(info.value)
    assert "does not exist" in str(info.value)
    assert "argument" in str(info.value)


def test_missing_file_named_by_env_var_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError) as info:
        load_config(environ={CONFIG_ENV: str(missing)})
    assert str(missing) in str(info.value)
    assert CONFIG_ENV in str(info.value)


def test_empty_file_means_no_settings(cfg_file: Path) -> None:
    cfg_file.parent.mkdir(parents=True)
    cfg_file.write_text("  \n", encoding="utf-8")
    assert load_config(cfg_file, environ={}).display() == load_config(environ={}).display()


def test_schema_key_in_file_is_allowed(cfg_file: Path) -> None:
    write_json(cfg_file, {"$schema": "./config.schema.json", "recallLimit": 5})
    assert load_config(cfg_file, environ={}).recall_limit == 5


# ---------------------------------------------------------------------------------------------
# Explicit overrides


def test_overrides_accept_camel_case_and_snake_case() -> None:
    config = load_config(environ={}, recallBudget=111, recall_limit=2, captureToolResults=True)
    assert config.recall_budget == 111
    assert config.recall_limit == 2
    assert config.capture_tool_results is True
    assert config.source_of("capture_tool_results") == "argument"


def test_unknown_override_is_an_error_with_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={}, recall_budgt=1)
    assert info.value.key == "recall_budgt"
    assert info.value.source == "argument"
    assert "recall_budgt" in str(info.value)
    assert "did you mean 'recall_budget'" in str(info.value)


def test_override_error_names_argument_as_source() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={}, recallLimit=0)
    assert info.value.key == "recallLimit"
    assert info.value.source == "argument"
    assert str(info.value).startswith("argument: ")


# ---------------------------------------------------------------------------------------------
# Environment variables


@pytest.mark.parametrize(
    ("var", "field", "raw", "expected"),
    [
        (
            "OPENVIKING_URL",
            "endpoint",
            "https://ov.example.com:8443",
            "https://ov.example.com:8443",
        ),
        ("OPENVIKING_ACCOUNT", "account", "acme", "acme"),
        ("OPENVIKING_USER", "user", "alice", "alice"),
        ("OPENVIKING_AGENT_ID", "agent_id", "claude-code", "claude-code"),
        ("OPENVIKING_PEER_ID", "peer_id", "peer-7", "peer-7"),
    ],
)
def test_each_openviking_variable_sets_its_key(
    var: str, field: str, raw: str, expected: str
) -> None:
    config = load_config(environ={var: raw})
    assert getattr(config, field) == expected
    assert config.source_of(field) == var
    assert env_var_for(field) == var


def test_openviking_api_key_variable_sets_the_secret() -> None:
    config = load_config(environ={"OPENVIKING_API_KEY": SECRET})
    assert config.api_key.get_secret_value() == SECRET
    assert config.source_of("api_key") == "OPENVIKING_API_KEY"
    assert env_var_for("api_key") == "OPENVIKING_API_KEY"


def test_every_other_key_uses_the_ov_agent_ext_prefix() -> None:
    shared = {"endpoint", "api_key", "account", "user", "agent_id", "peer_id"}
    for name in OVConfig.model_fields:
        if name not in shared:
            assert env_var_for(name) == "OV_AGENT_EXT_" + name.upper()
    assert env_var_for("recall_budget") == "OV_AGENT_EXT_RECALL_BUDGET"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("false", False), ("1", True), ("0", False), ("yes", True), ("off", False)],
)
def test_ov_agent_ext_bool_variable(raw: str, expected: bool) -> None:
    config = load_config(environ={"OV_AGENT_EXT_CAPTURE_TOOL_RESULTS": raw})
    assert config.capture_tool_results is expected
    config = load_config(environ={"OV_AGENT_EXT_ENABLED": raw})
    assert config.enabled is expected


def test_ov_agent_ext_bool_variable_rejects_garbage() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={"OV_AGENT_EXT_ENABLED": "maybe"})
    assert info.value.key == "enabled"
    assert info.value.source == "OV_AGENT_EXT_ENABLED"
    assert "boolean" in str(info.value)


def test_ov_agent_ext_int_variable() -> None:
    config = load_config(environ={"OV_AGENT_EXT_RECALL_BUDGET": "3500"})
    assert config.recall_budget == 3500
    assert isinstance(config.recall_budget, int)


def test_ov_agent_ext_int_variable_rejects_non_integer() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={"OV_AGENT_EXT_RECALL_LIMIT": "six"})
    assert info.value.key == "recallLimit"
    assert info.value.source == "OV_AGENT_EXT_RECALL_LIMIT"
    assert "OV_AGENT_EXT_RECALL_LIMIT" in str(info.value)
    assert "integer" in str(info.value)


def test_ov_agent_ext_float_variable() -> None:
    config = load_config(
        environ={"OV_AGENT_EXT_RECALL_SCORE_THRESHOLD": "0.5", "OV_AGENT_EXT_READ_TIMEOUT": "2.5"}
    )
    assert config.recall_score_threshold == 0.5
    assert config.read_timeout == 2.5


def test_ov_agent_ext_literal_and_path_variables(tmp_path: Path) -> None:
    config = load_config(
        environ={
            "OV_AGENT_EXT_CAPTURE_MODE": "keyword",
            "OV_AGENT_EXT_LOG_LEVEL": "debug",
            "OV_AGENT_EXT_STATE_DIR": str(tmp_path / "state"),
            "OV_AGENT_EXT_TOKENIZER": "estimate",
        }
    )
    assert config.capture_mode == "keyword"
    assert config.log_level == "debug"
    assert config.state_dir == tmp_path / "state"
    assert config.tokenizer == "estimate"


def test_ov_agent_ext_list_variable_as_json_array() -> None:
    config = load_config(environ={"OV_AGENT_EXT_BYPASS_PATTERNS": '["/tmp/**", "a, b/*"]'})
    assert config.bypass_patterns == ("/tmp/**", "a, b/*")
    assert config.source_of("bypass_patterns") == "OV_AGENT_EXT_BYPASS_PATTERNS"


def test_ov_agent_ext_list_variable_comma_separated() -> None:
    config = load_config(environ={"OV_AGENT_EXT_BYPASS_PATTERNS": " /tmp/** , scratch-*,, "})
    assert config.bypass_patterns == ("/tmp/**", "scratch-*")


def test_ov_agent_ext_list_variable_with_broken_json_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={"OV_AGENT_EXT_BYPASS_PATTERNS": '["/tmp/**"'})
    assert info.value.key == "bypassPatterns"
    assert info.value.source == "OV_AGENT_EXT_BYPASS_PATTERNS"


def test_unknown_ov_agent_ext_variable_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={"OV_AGENT_EXT_RECALL_BUDGT": "1"})
    assert "OV_AGENT_EXT_RECALL_BUDGT" in str(info.value)
    assert info.value.source == "OV_AGENT_EXT_RECALL_BUDGT"
    assert "did you mean 'OV_AGENT_EXT_RECALL_BUDGET'" in str(info.value)


@pytest.mark.parametrize(
    ("var", "shared"),
    [("OV_AGENT_EXT_ENDPOINT", "OPENVIKING_URL"), ("OV_AGENT_EXT_API_KEY", "OPENVIKING_API_KEY")],
)
def test_prefixed_variable_for_a_shared_key_points_to_the_shared_variable(
    var: str, shared: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={var: "http://h:1"})
    assert var in str(info.value)
    assert f"did you mean '{shared}'" in str(info.value)


def test_unrelated_variables_are_ignored() -> None:
    config = load_config(environ={"OPENVIKING_SOMETHING_ELSE": "x", "PATH": "/bin", "OV_X": "1"})
    assert config.display() == load_config(environ={}).display()


# ---------------------------------------------------------------------------------------------
# config.json errors


def test_unknown_key_in_file_is_an_error_with_suggestion(cfg_file: Path) -> None:
    write_json(cfg_file, {"recallBudgit": 1500})
    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={})
    assert info.value.key == "recallBudgit"
    assert info.value.source == str(cfg_file)
    assert str(cfg_file) in str(info.value)
    assert "unknown key 'recallBudgit'" in str(info.value)
    assert "did you mean 'recallBudget'" in str(info.value)


@pytest.mark.parametrize(
    ("snake", "camel"),
    [("recall_budget", "recallBudget"), ("agent_id", "agentId"), ("api_key", "apiKey")],
)
def test_snake_case_key_in_file_is_an_error_suggesting_camel_case(
    cfg_file: Path, snake: str, camel: str
) -> None:
    write_json(cfg_file, {snake: SECRET if snake == "api_key" else 1})
    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={})
    assert info.value.key == snake
    assert f"did you mean '{camel}'" in str(info.value)
    assert SECRET not in str(info.value)


def test_invalid_json_is_an_error_with_line_and_column(cfg_file: Path) -> None:
    cfg_file.parent.mkdir(parents=True)
    cfg_file.write_text('{\n  "recallBudget": 1500,\n  "recallLimit" 3\n}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={})
    message = str(info.value)
    assert str(cfg_file) in message
    assert "invalid JSON" in message
    assert "line 3 column 17" in message
    assert info.value.source == str(cfg_file)


@pytest.mark.parametrize("document", ["[1, 2]", '"recallBudget"', "42", "null"])
def test_non_object_json_is_an_error(cfg_file: Path, document: str) -> None:
    cfg_file.parent.mkdir(parents=True)
    cfg_file.write_text(document, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={})
    assert "expected a JSON object" in str(info.value)
    assert info.value.source == str(cfg_file)


def test_wrong_type_in_file_names_key_source_and_expectation(cfg_file: Path) -> None:
    write_json(cfg_file, {"recallLimit": "many"})
    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={})
    message = str(info.value)
    assert info.value.key == "recallLimit"
    assert info.value.source == str(cfg_file)
    assert "'recallLimit'" in message
    assert str(cfg_file) in message
    assert "integer" in message
    assert "'many'" in message


def test_error_reports_the_source_that_supplied_the_bad_value(cfg_file: Path) -> None:
    # The file is valid; the environment overrides it with a bad value.
    write_json(cfg_file, {"recallLimit": 3})
    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={"OV_AGENT_EXT_RECALL_LIMIT": "0"})
    assert info.value.source == "OV_AGENT_EXT_RECALL_LIMIT"


# ---------------------------------------------------------------------------------------------
# Value validation: ranges are enforced, never clamped


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("recallLimit", 0, "greater than or equal to 1"),
        ("recallLimit", 101, "less than or equal to 100"),
        ("recallScoreThreshold", 1.5, "less than or equal to 1"),
        ("recallScoreThreshold", -0.1, "greater than or equal to 0"),
        ("recallBudget", -1, "greater than or equal to 0"),
        ("profileBudget", -5, "greater than or equal to 0"),
        ("resumeContextBudget", -1, "greater than or equal to 0"),
        ("indexBudget", -1, "greater than or equal to 0"),
        ("commitTokenThreshold", -1, "greater than or equal to 0"),
        ("recallMaxContentChars", 0, "greater than or equal to 1"),
        ("recallMinQueryLength", -1, "greater than or equal to 0"),
        ("captureMaxLength", 0, "greater than or equal to 1"),
        ("healthTimeout", 0, "greater than 0"),
        ("readTimeout", -1, "greater than 0"),
        ("writeTimeout", 601, "less than or equal to 600"),
        ("connectTimeout", 0, "greater than 0"),
        ("writeQueueFlushInterval", 5, "greater than or equal to 10"),
        ("writeQueueFlushThreshold", 0, "greater than or equal to 1"),
    ],
)
def test_out_of_range_values_are_rejected(
    cfg_file: Path, key: str, value: float, expected: str
) -> None:
    write_json(cfg_file, {key: value})
    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={})
    message = str(info.value)
    assert info.value.key == key
    assert info.value.source == str(cfg_file)
    assert f"'{key}'" in message
    assert str(cfg_file) in message
    assert expected in message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("recallLimit", 1),
        ("recallLimit", 100),
        ("recallScoreThreshold", 0),
        ("recallScoreThreshold", 1),
        ("recallBudget", 0),
        ("commitTokenThreshold", 0),
        ("writeTimeout", 600),
        ("writeQueueFlushInterval", 10),
    ],
)
def test_boundary_values_are_accepted_unchanged(cfg_file: Path, key: str, value: float) -> None:
    write_json(cfg_file, {key: value})
    shown = load_config(cfg_file, environ={}).display()
    assert shown[key] == (value, str(cfg_file))


def test_nan_threshold_is_rejected() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={"OV_AGENT_EXT_RECALL_SCORE_THRESHOLD": "nan"})
    assert info.value.key == "recallScoreThreshold"


@pytest.mark.parametrize(
    "endpoint", ["ftp://ov.example.com", "localhost:1933", "http://", "127.0.0.1"]
)
def test_bad_endpoint_is_rejected(endpoint: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={"OPENVIKING_URL": endpoint})
    assert info.value.key == "endpoint"
    assert info.value.source == "OPENVIKING_URL"
    assert "http:// or https://" in str(info.value)


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("https://ov.example.com", "https://ov.example.com"),
        ("http://10.0.0.5:1933/", "http://10.0.0.5:1933"),
        (" http://localhost:1933// ", "http://localhost:1933"),
    ],
)
def test_endpoint_is_normalised(endpoint: str, expected: str) -> None:
    assert load_config(environ={}, endpoint=endpoint).endpoint == expected


@pytest.mark.parametrize(
    "spec", ["auto", "estimate", "tiktoken:cl100k_base", "tiktoken:o200k_base"]
)
def test_good_tokenizer_specs_are_accepted(spec: str) -> None:
    assert load_config(environ={}, tokenizer=spec).tokenizer == spec


@pytest.mark.parametrize("spec", ["", "tiktoken", "tiktoken:", "bpe", "tiktoken:a b", "AUTO"])
def test_bad_tokenizer_spec_is_rejected(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={}, tokenizer=spec)
    assert info.value.key == "tokenizer"
    assert "'auto', 'estimate' or 'tiktoken:" in str(info.value)


def test_good_bypass_patterns_are_accepted(cfg_file: Path) -> None:
    patterns = ["/home/*/scratch/**", "*.tmp", "session-*", "!keep"]
    write_json(cfg_file, {"bypassPatterns": patterns})
    assert load_config(cfg_file, environ={}).bypass_patterns == tuple(patterns)


@pytest.mark.parametrize("pattern", ["!", "\\"])
def test_bad_bypass_pattern_is_rejected(cfg_file: Path, pattern: str) -> None:
    write_json(cfg_file, {"bypassPatterns": ["ok/**", pattern]})
    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={})
    assert info.value.key == "bypassPatterns"
    assert info.value.source == str(cfg_file)
    assert f"invalid glob {pattern!r}" in str(info.value)


def test_bypass_patterns_must_be_strings(cfg_file: Path) -> None:
    write_json(cfg_file, {"bypassPatterns": "*.tmp"})
    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={})
    assert info.value.key == "bypassPatterns"
    assert "list" in str(info.value)


@pytest.mark.parametrize(("key", "value"), [("captureMode", "all"), ("logLevel", "verbose")])
def test_enumerated_values_are_checked(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={}, **{key: value})
    assert info.value.key == key
    assert repr(value) in str(info.value)


# ---------------------------------------------------------------------------------------------
# The API key


def test_api_key_never_in_repr_or_str() -> None:
    config = load_config(environ={"OPENVIKING_API_KEY": SECRET})
    assert config.api_key.get_secret_value() == SECRET
    for text in (repr(config), str(config), repr(config.api_key), str(config.api_key)):
        assert SECRET not in text
    assert SECRET not in config.model_dump_json()
    assert SECRET not in str(config.display())


def test_display_masks_api_key() -> None:
    shown = load_config(environ={"OPENVIKING_API_KEY": SECRET}).display()
    assert shown["apiKey"] == ("********", "OPENVIKING_API_KEY")
    # No key: shown as empty, not as a mask that suggests one is set.
    assert load_config(environ={}).display()["apiKey"] == ("", "default")


def test_display_reports_values_and_sources(cfg_file: Path, tmp_path: Path) -> None:
    write_json(cfg_file, {"recallBudget": 1500, "stateDir": str(tmp_path / "st")})
    shown = load_config(cfg_file, environ={"OPENVIKING_USER": "bob"}, recallLimit=4).display()
    assert shown["recallBudget"] == (1500, str(cfg_file))
    assert shown["stateDir"] == (str(tmp_path / "st"), str(cfg_file))
    assert shown["user"] == ("bob", "OPENVIKING_USER")
    assert shown["recallLimit"] == (4, "argument")
    assert shown["indexBudget"] == (2000, "default")
    json.dumps(shown)  # JSON-ready


@pytest.mark.parametrize("bad_key", [987654321, [SECRET], {"token": SECRET}, 12.5])
def test_api_key_type_error_in_file_does_not_leak_it(cfg_file: Path, bad_key: Any) -> None:
    write_json(cfg_file, {"apiKey": bad_key})
    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={})
    assert info.value.key == "apiKey"
    assert info.value.source == str(cfg_file)
    leaked = SECRET if not isinstance(bad_key, (int, float)) else str(bad_key)
    for text in (str(info.value), repr(info.value), repr(info.value.args)):
        assert leaked not in text
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__


def test_api_key_type_error_in_argument_does_not_leak_it() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={}, api_key=[SECRET])
    assert info.value.key == "apiKey"
    assert SECRET not in str(info.value)
    assert SECRET not in repr(info.value)


def test_api_key_not_in_errors_about_other_keys(cfg_file: Path) -> None:
    write_json(cfg_file, {"apiKey": SECRET, "recallLimit": 0})
    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={})
    assert info.value.key == "recallLimit"
    assert SECRET not in str(info.value)


# ---------------------------------------------------------------------------------------------
# save_config


def test_save_config_writes_owner_only_camel_case_json(tmp_path: Path) -> None:
    target = tmp_path / "out" / "config.json"
    written = save_config({"recall_budget": 1234, "apiKey": SECRET}, target)
    assert written == target
    assert mode_of(target) == 0o600
    assert json.loads(target.read_text(encoding="utf-8")) == {
        "recallBudget": 1234,
        "apiKey": SECRET,
    }


def test_save_config_round_trips_through_load_config(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    values: dict[str, Any] = {
        "endpoint": "https://ov.example.com",
        "api_key": SecretStr(SECRET),
        "agentId": "codex",
        "recallScoreThreshold": 0.5,
        "bypassPatterns": ["/tmp/**", "scratch-*"],
        "state_dir": tmp_path / "state",
        "captureMode": "keyword",
        "enabled": False,
    }
    save_config(values, target)
    config = load_config(target, environ={})
    assert config.endpoint == "https://ov.example.com"
    assert config.api_key.get_secret_value() == SECRET
    assert config.agent_id == "codex"
    assert config.recall_score_threshold == 0.5
    assert config.bypass_patterns == ("/tmp/**", "scratch-*")
    assert config.state_dir == tmp_path / "state"
    assert config.capture_mode == "keyword"
    assert config.enabled is False
    assert config.source_of("agent_id") == str(target)
    assert config.source_of("recall_limit") == "default"


def test_save_config_defaults_to_the_default_config_path() -> None:
    written = save_config({"recallLimit": 9})
    assert written == default_config_path()
    assert mode_of(written) == 0o600
    assert load_config(environ={}).recall_limit == 9


def test_save_config_refuses_unknown_keys(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    with pytest.raises(ConfigError) as info:
        save_config({"recallBudgit": 1}, target)
    assert info.value.key == "recallBudgit"
    assert "did you mean 'recallBudget'" in str(info.value)
    assert not target.exists()


def test_save_config_refuses_invalid_values_and_leaves_file_alone(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    target.write_text('{"recallLimit": 3}', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        save_config({"recallLimit": 0, "apiKey": SECRET}, target)
    assert info.value.key == "recallLimit"
    assert SECRET not in str(info.value)
    assert json.loads(target.read_text(encoding="utf-8")) == {"recallLimit": 3}


def test_save_config_overwrites_existing_0644_file_and_leaves_0600(tmp_path: Path) -> None:
    folder = tmp_path / "cfg"
    folder.mkdir()
    target = folder / "config.json"
    target.write_text('{"recallLimit": 3}', encoding="utf-8")
    target.chmod(0o644)
    assert mode_of(target) == 0o644
    save_config({"apiKey": SECRET}, target)
    assert mode_of(target) == 0o600
    assert json.loads(target.read_text(encoding="utf-8")) == {"apiKey": SECRET}
    assert sorted(p.name for p in folder.iterdir()) == ["config.json"]  # no temp files left


def test_save_config_is_0600_even_with_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        target = save_config({"apiKey": SECRET}, tmp_path / "config.json")
    finally:
        os.umask(old)
    assert mode_of(target) == 0o600


def test_empty_environment_variable_counts_as_unset(cfg_file: Path) -> None:
    write_json(cfg_file, {"endpoint": "http://from-file:1933"})
    config = load_config(
        cfg_file, environ={"OPENVIKING_URL": "", "OV_AGENT_EXT_RECALL_BUDGET": " "}
    )
    assert config.endpoint == "http://from-file:1933"
    assert config.source_of("endpoint") == str(cfg_file)
    assert config.recall_budget == 2000


def test_empty_endpoint_argument_is_rejected() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={}, endpoint="")
    assert (info.value.key, info.value.source) == ("endpoint", "argument")


@pytest.mark.parametrize("key", ["recallBudget", "recallScoreThreshold", "readTimeout"])
def test_booleans_are_not_numbers(cfg_file: Path, key: str) -> None:
    write_json(cfg_file, {key: True})
    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={})
    assert info.value.key == key
    assert "boolean" in str(info.value)


def test_state_dir_expands_home_and_null_means_default(
    cfg_file: Path, isolated_environment: Path
) -> None:
    assert load_config(environ={}, state_dir="~/ovstate").state_dir == (
        isolated_environment / "ovstate"
    )
    write_json(cfg_file, {"stateDir": None})
    assert load_config(cfg_file, environ={}).state_dir == OVConfig().state_dir


def test_bypass_patterns_are_immutable() -> None:
    config = load_config(environ={}, bypass_patterns=["/tmp/**"])
    assert isinstance(config.bypass_patterns, tuple)


def test_save_config_ignores_schema_key(tmp_path: Path) -> None:
    target = save_config({"$schema": "./schema.json", "recallLimit": 4}, tmp_path / "c.json")
    assert json.loads(target.read_text()) == {"recallLimit": 4}
