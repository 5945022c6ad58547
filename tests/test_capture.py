"""Capture: the filter, stripping, tool parts, redaction, token counts, host message lists."""

from __future__ import annotations

import doctest
import json
import time
import typing
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import ov_agent_ext.capture
import ov_agent_ext.redact
from ov_agent_ext.blocks import format_recall_block
from ov_agent_ext.capture import (
    TOOL_INPUT_CAP,
    TOOL_OUTPUT_CAP,
    CaptureDecision,
    CaptureReason,
    ToolCall,
    Turn,
    build_messages,
    clean_text,
    should_capture,
    turn_from_messages,
)
from ov_agent_ext.config import OVConfig
from ov_agent_ext.models import Message, TextPart, ToolPart
from ov_agent_ext.tokens import estimate_tokens

REASONS = set(typing.get_args(CaptureReason))
RECALL = format_recall_block(
    ["- [memory 0.87] User prefers local/self-hosted solutions", "- [memory 0.80] Falcon uses Go"]
)


def decide(text: str, mode: str = "semantic", max_length: int = 24000) -> tuple[bool, str]:
    decision = should_capture(text, mode, max_length)  # type: ignore[arg-type]
    return decision.capture, decision.reason


def config(**overrides: Any) -> OVConfig:
    return OVConfig(**overrides)


def dump(message: Message) -> str:
    return json.dumps(message.to_request(), ensure_ascii=False)


def assistant_parts(captured_messages: list[Message]) -> list[Any]:
    assert captured_messages[-1].role == "assistant"
    parts = captured_messages[-1].parts
    assert parts is not None
    return list(parts)


def test_module_examples() -> None:
    for module in (ov_agent_ext.capture, ov_agent_ext.redact):
        result = doctest.testmod(module)
        assert result.attempted > 0, module.__name__
        assert result.failed == 0, module.__name__


# --- the filter: each rule, its reason, its boundaries -------------------------------------------


@pytest.mark.parametrize("text", ["", "   \n\t ", "\x00\x00", RECALL, f"{RECALL}\n\n  "])
def test_empty(text: str) -> None:
    assert decide(text) == (False, "empty")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("abcdefghi", (False, "length_out_of_range")),  # 9 characters
        ("abcdefghij", (True, "semantic")),  # 10: the Latin minimum
        ("abc def ghi", (False, "length_out_of_range")),  # whitespace does not count
        ("abc def ghij", (True, "semantic")),
        ("ok thanks", (False, "length_out_of_range")),
        ("你好吗", (False, "length_out_of_range")),  # 3 CJK characters
        ("你好世界", (True, "semantic")),  # 4: the CJK minimum
        ("你 好 吗", (False, "length_out_of_range")),
        ("ありがと", (True, "semantic")),  # kana count as CJK
        ("ありが", (False, "length_out_of_range")),
        ("안녕하세", (True, "semantic")),  # Hangul too
        ("감사", (False, "length_out_of_range")),
        ("ok好的", (True, "semantic")),  # any CJK lowers the minimum to 4
        ("豈豈豈", (False, "length_out_of_range")),  # compatibility ideographs are CJK
    ],
)
def test_minimum_length_is_cjk_aware(text: str, expected: tuple[bool, str]) -> None:
    assert decide(text) == expected


def test_maximum_length_boundary() -> None:
    assert decide("a" * 50, max_length=50) == (True, "semantic")
    assert decide("a" * 51, max_length=50) == (False, "length_out_of_range")
    # The normalized text counts (whitespace included), as JavaScript's length: UTF-16 units.
    assert decide("a b " * 12 + "ab", max_length=50) == (True, "semantic")
    assert decide("abcdefghij" + "😀" * 20, max_length=50) == (True, "semantic")
    assert decide("abcdefghij" + "😀" * 21, max_length=50) == (False, "length_out_of_range")
    # The default is captureMaxLength's.
    assert decide("word " * 4800) == (True, "semantic")
    assert decide("word " * 4801 + "x") == (False, "length_out_of_range")


def test_astral_characters_count_twice_toward_the_minimum() -> None:
    # 5 emoji are 10 UTF-16 units: long enough, then dropped as symbols only.
    assert decide("😀" * 5) == (False, "non_content")
    assert decide("😀" * 4) == (False, "length_out_of_range")


@pytest.mark.parametrize(
    "text",
    ["/help", "/compact", "/compact now please", "/review-pr 123 carefully", "/Help me out", "/a"],
)
def test_slash_commands(text: str) -> None:
    expected = (False, "length_out_of_range") if len(text.replace(" ", "")) < 10 else None
    assert decide(text) == (expected or (False, "command"))


@pytest.mark.parametrize(
    "text", ["/compact now please", "/review-pr 123 carefully", "/memory_add x y"]
)
def test_slash_commands_long_enough_to_pass_the_length_rule(text: str) -> None:
    assert decide(text) == (False, "command")


@pytest.mark.parametrize(
    "text",
    [
        "please run /help later on",
        "/etc/nginx/nginx.conf has a typo, fix it",  # a path, not a command (our deviation)
        "/" + "a" * 65 + " is too long for a command name",
    ],
)
def test_not_slash_commands(text: str) -> None:
    assert decide(text) == (True, "semantic")


@pytest.mark.parametrize(
    "text",
    [
        "?!?!?!?!?!?!",
        "…… —— !!!! ....",
        "🎉🎉🎉🎉🎉🎉",
        "+++ --- === ***",
        "。。。。。，，，，，！！",
    ],
)
def test_non_content(text: str) -> None:
    assert decide(text) == (False, "non_content")


@pytest.mark.parametrize(
    "text",
    [
        "What is the capital of France?",
        "how does the recall pipeline work?",
        "Is this function thread-safe？",  # fullwidth question mark
        "CAN you explain the retry policy?",
        "should we? really? truly?",
        "what " + "x" * 199 + "?",  # 200 characters between the word and the mark
    ],
)
def test_question_only(text: str) -> None:
    assert decide(text) == (False, "question_only")


@pytest.mark.parametrize(
    "text",
    [
        "What I want is a faster build.",
        "Why? Because I prefer tabs over spaces.",
        "Please tell me what the capital of France is?",
        "whatever happened to the nightly build?",  # "what" is not a whole word here
        "what " + "x" * 200 + "?",  # 201 characters: more than a bare question
        "What is X\nand how does it relate to Y?",  # "." stops at a line break, as in JS
    ],
)
def test_not_question_only(text: str) -> None:
    assert decide(text) == (True, "semantic")


@pytest.mark.parametrize(
    "text",
    [
        "Remember that staging runs on port 5433",
        "We decided to drop Python 3.9 support",
        "contact the oncall at ops-team@example.com today",
        "my name is Ana and I run the infra team",
        "I need the build to finish in five minutes",
        "my favourite editor for Rust is Helix",
        "I think we should vendor this dependency",
    ],
)
def test_keyword_mode_captures_triggers(text: str) -> None:
    assert decide(text, "keyword") == (True, "trigger_matched")
    assert decide(text, "semantic") == (True, "semantic")


def test_keyword_mode_without_a_trigger() -> None:
    text = "Rename the helper to parse_config everywhere"
    assert decide(text, "keyword") == (False, "no_trigger")
    assert decide(text, "semantic") == (True, "semantic")


def test_filters_run_before_the_keyword_gate() -> None:
    assert decide("/remember this forever", "keyword") == (False, "command")
    # "do" is not among the spec's question words; "does" is.
    assert decide("Do you remember my name?", "keyword") == (True, "trigger_matched")
    assert decide("Does the agent remember my name?", "keyword") == (False, "question_only")


def test_filter_runs_on_stripped_text() -> None:
    assert decide(f"{RECALL}\n\nok") == (False, "length_out_of_range")
    assert decide(f"{RECALL}\n\n/compact now please") == (False, "command")
    assert decide("<system-reminder>remember everything</system-reminder>\nRename the helper") == (
        True,
        "semantic",
    )


def test_unknown_mode_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="capture mode"):
        should_capture("Rename the helper everywhere", "always")  # type: ignore[arg-type]


def test_decision_shape() -> None:
    assert should_capture("Rename the helper everywhere") == CaptureDecision(True, "semantic")


@settings(max_examples=150, deadline=None, database=None)
@given(st.text(), st.sampled_from(["semantic", "keyword"]), st.integers(1, 100))
def test_should_capture_never_raises(text: str, mode: str, max_length: int) -> None:
    decision = should_capture(text, mode, max_length)  # type: ignore[arg-type]
    assert decision.reason in REASONS
    assert decision.capture == (decision.reason in ("semantic", "trigger_matched"))


# --- building messages --------------------------------------------------------------------------


def test_user_and_assistant_messages_with_tool_parts() -> None:
    turn = Turn(
        7,
        user="Fix the flaky test in test_sync.py",
        assistant="Fixed: the test waited on a real clock.",
        tool_calls=[
            ToolCall("read", {"path": "tests/test_sync.py"}, output="def test_x(): ...", id="t1"),
            ToolCall(
                "edit", {"path": "tests/test_sync.py", "old": "sleep(1)", "new": "advance(1)"}
            ),
            ToolCall("read", {"path": "sync.py"}, output="..."),
            ToolCall("bash", {"command": "pytest -x"}, output="boom", status="error", id="t4"),
        ],
    )
    captured = build_messages(turn, config())
    assert captured.decision == CaptureDecision(True, "semantic")
    user, assistant = captured.messages
    assert user == Message(role="user", content="Fix the flaky test in test_sync.py")
    assert assistant.role == "assistant"
    assert assistant.content is None
    parts = assistant_parts(captured.messages)
    assert parts[0] == TextPart(
        text="Fixed: the test waited on a real clock.\n\n[assistant used tools: read, edit, bash]"
    )
    assert parts[1:] == [
        ToolPart(tool_id="t1", tool_name="read", tool_input={"path": "tests/test_sync.py"}),
        ToolPart(
            tool_id="turn7-tool1",
            tool_name="edit",
            tool_input={"path": "tests/test_sync.py", "old": "sleep(1)", "new": "advance(1)"},
        ),
        ToolPart(tool_id="turn7-tool2", tool_name="read", tool_input={"path": "sync.py"}),
        ToolPart(
            tool_id="t4", tool_name="bash", tool_input={"command": "pytest -x"}, tool_status="error"
        ),
    ]
    # Outputs are dropped by default: the parts carry none.
    assert all(p.tool_output == "" for p in parts[1:])


def test_tool_results_kept_and_capped_when_asked() -> None:
    long = "line of output\n" * 1000
    turn = Turn(
        0,
        user="Run the test suite please",
        tool_calls=[
            ToolCall("bash", {"command": "pytest"}, output="3 passed"),
            ToolCall("cat", {}, output=long),
        ],
    )
    parts = assistant_parts(build_messages(turn, config(capture_tool_results=True)).messages)
    assert parts[1].tool_output == "3 passed"
    assert parts[2].tool_output == long[:TOOL_OUTPUT_CAP] + "…[truncated]"
    assert TOOL_OUTPUT_CAP == 2000


def test_tool_input_strings_are_capped_structure_kept() -> None:
    content = "x = 1\n" * 2000
    turn = Turn(
        0,
        user="Write the config module",
        tool_calls=[
            ToolCall(
                "write", {"path": "cfg.py", "content": content, "mode": 0o644, "tags": ["a", "b"]}
            )
        ],
    )
    part = assistant_parts(build_messages(turn, config()).messages)[1]
    assert part.tool_input == {
        "path": "cfg.py",
        "content": content[:TOOL_INPUT_CAP] + "…[truncated]",
        "mode": 0o644,
        "tags": ["a", "b"],
    }


def test_tool_input_whitespace_is_kept_exactly() -> None:
    old = "    if x:\n        return 1\n\n\n\n    return 2\n"
    turn = Turn(0, user="Simplify the branch please", tool_calls=[ToolCall("edit", {"old": old})])
    assert assistant_parts(build_messages(turn, config()).messages)[1].tool_input == {"old": old}


def test_tool_inputs_become_json_safe() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing"

    turn = Turn(
        0,
        user="Do the weird thing now",
        tool_calls=[
            ToolCall(
                "odd",
                {"b": b"bytes", "s": {1}, "t": (1, 2), "f": float("nan"), "o": Thing(), "n": None},
            )
        ],
    )
    captured = build_messages(turn, config())
    part = assistant_parts(captured.messages)[1]
    assert part.tool_input == {
        "b": "bytes",
        "s": [1],
        "t": [1, 2],
        "f": "nan",
        "o": "thing",
        "n": None,
    }
    json.dumps([m.to_request() for m in captured.messages], allow_nan=False)


def test_summary_line_lists_unique_tools_in_order_of_first_use() -> None:
    calls = [ToolCall(n, {}) for n in ("read", "edit", "read", "bash", "edit")]
    turn = Turn(0, user="Refactor the sync module", assistant="Done.", tool_calls=calls)
    parts = assistant_parts(build_messages(turn, config()).messages)
    assert parts[0].text == "Done.\n\n[assistant used tools: read, edit, bash]"
    assert [p.tool_name for p in parts[1:]] == ["read", "edit", "read", "bash", "edit"]


def test_no_tools_no_summary_line() -> None:
    captured = build_messages(
        Turn(0, user="Explain the outbox design", assistant="It is..."), config()
    )
    assert assistant_parts(captured.messages) == [TextPart(text="It is...")]


def test_no_assistant_text_and_no_tools_sends_only_the_user_message() -> None:
    captured = build_messages(Turn(0, user="Explain the outbox design"), config())
    assert [m.role for m in captured.messages] == ["user"]


def test_tool_only_turn_still_sends_and_counts() -> None:
    turn = Turn(
        3,
        user="Update the lockfile",
        tool_calls=[
            ToolCall("bash", {"command": "uv lock --upgrade"}, output="Resolved 42 packages")
        ],
    )
    captured = build_messages(turn, config())
    parts = assistant_parts(captured.messages)
    assert parts[0] == TextPart(text="[assistant used tools: bash]")
    assert isinstance(parts[1], ToolPart)
    user_only = estimate_tokens("Update the lockfile")
    assert captured.tokens > user_only
    assert captured.tokens == (
        user_only
        + estimate_tokens("[assistant used tools: bash]")
        + estimate_tokens(
            json.dumps({"name": "bash", "input": {"command": "uv lock --upgrade"}, "output": ""})
        )
    )


def test_tokens_count_cjk_in_tool_inputs_and_outputs() -> None:
    def tokens(value: str, results: bool) -> int:
        turn = Turn(
            0,
            user="整理一下这个文件",
            tool_calls=[ToolCall("write", {"content": value}, output=value)],
        )
        return build_messages(turn, config(capture_tool_results=results)).tokens

    ascii_text, cjk_text = "a" * 40, "汉" * 40
    assert tokens(cjk_text, False) - tokens(ascii_text, False) == 60 - 10  # 40 * 1.5 vs 40 / 4
    assert tokens(cjk_text, True) - tokens(ascii_text, True) == 2 * (60 - 10)


def test_tokens_without_assistant_turns_are_the_user_message_only() -> None:
    turn = Turn(
        0,
        user="Remember: deploys go through ArgoCD",
        assistant="Noted, I'll use ArgoCD.",
        tool_calls=[ToolCall("bash", {"command": "argocd app list"})],
    )
    captured = build_messages(turn, config(capture_assistant_turns=False))
    assert captured.messages == [
        Message(role="user", content="Remember: deploys go through ArgoCD")
    ]
    assert captured.tokens == estimate_tokens("Remember: deploys go through ArgoCD")


@pytest.mark.parametrize(
    ("user", "reason"),
    [
        ("ok", "length_out_of_range"),
        ("/compact", "length_out_of_range"),
        ("/compact the session now", "command"),
        ("What is this?", "question_only"),
    ],
)
def test_skipped_turns_send_nothing_and_say_why(user: str, reason: str) -> None:
    turn = Turn(
        0, user=user, assistant="A long answer.", tool_calls=[ToolCall("read", {"path": "x"})]
    )
    captured = build_messages(turn, config())
    assert captured.messages == []
    assert captured.tokens == 0
    assert captured.decision == CaptureDecision(False, reason)  # type: ignore[arg-type]


def test_a_huge_prompt_is_rejected_without_redacting_it() -> None:
    text = "export API_TOKEN=abc123def456 " * 40_000  # ~1.2 MB
    start = time.perf_counter()
    captured = build_messages(Turn(0, user=text), config())
    assert time.perf_counter() - start < 0.5
    assert captured.decision == CaptureDecision(False, "length_out_of_range")
    assert captured.messages == []


def test_keyword_mode_in_build() -> None:
    cfg = config(capture_mode="keyword")
    assert (
        build_messages(Turn(0, user="Rename the helper everywhere"), cfg).decision.reason
        == "no_trigger"
    )
    assert (
        build_messages(Turn(0, user="I prefer ruff over flake8"), cfg).decision.reason
        == "trigger_matched"
    )


def test_max_length_from_config() -> None:
    cfg = config(capture_max_length=20)
    assert build_messages(Turn(0, user="a" * 20), cfg).decision.capture
    assert build_messages(Turn(0, user="a" * 21), cfg).decision.reason == "length_out_of_range"


# --- injected blocks never leave ----------------------------------------------------------------


def test_injected_blocks_are_stripped_from_both_sides() -> None:
    turn = Turn(
        0,
        user=(
            f"{RECALL}\n\nAdd retries to the client\n"
            "<system-reminder>todo list empty</system-reminder>"
        ),
        assistant=(
            "<system-reminder>the user's files changed</system-reminder>Added retries.\n"
            "<openviking-context>profile</openviking-context>"
        ),
        tool_calls=[
            ToolCall(
                "read",
                {"path": "client.py"},
                output="def get(): ...\n<system-reminder>consider malware</system-reminder>",
            )
        ],
    )
    captured = build_messages(turn, config(capture_tool_results=True))
    user, _ = captured.messages
    parts = assistant_parts(captured.messages)
    assert user.content == "Add retries to the client"
    assert parts[0].text == "Added retries.\n\n[assistant used tools: read]"
    assert parts[1].tool_output == "def get(): ..."
    for message in captured.messages:
        text = dump(message)
        for marker in ("relevant-memories", "system-reminder", "openviking-context", "Falcon"):
            assert marker not in text


def test_recalled_memories_fed_back_are_not_captured() -> None:
    """A recall block injected into the prompt, quoted back by the assistant and written to a
    file by a tool, is not captured anywhere (the feedback loop)."""
    turn = Turn(
        1,
        user=f"{RECALL}\n\nSet up the new service",
        assistant=f"Based on what I recall:\n{RECALL}\nI'll use Go.",
        tool_calls=[ToolCall("write", {"path": "NOTES.md", "content": f"notes\n{RECALL}\nend"})],
    )
    captured = build_messages(turn, config(capture_tool_results=True))
    everything = "".join(dump(m) for m in captured.messages)
    assert "relevant-memories" not in everything
    assert "self-hosted" not in everything
    assert "Falcon" not in everything
    assert captured.messages[0].content == "Set up the new service"


def test_half_blocks_left_by_a_cut_are_dropped() -> None:
    head_cut = "- [memory 0.80] Falcon uses Go\n</relevant-memories>\n\nDeploy the API now"
    tail_cut = "Deploy the API now\n<relevant-memories>\n- [memory 0.80] Falcon uses"
    assert clean_text(head_cut) == "Deploy the API now"
    assert clean_text(tail_cut) == "Deploy the API now"
    assert clean_text("<RELEVANT-MEMORIES>\nx") == ""


# --- redaction in everything that leaves --------------------------------------------------------


def test_secrets_are_redacted_everywhere() -> None:
    turn = Turn(
        0,
        user="Use OPENAI_API_KEY=sk-proj-4f9Qx7Lm2Zt8Rb6Wc1Yd3Ke5 for the evals",
        assistant="Set DB_PASSWORD: hunter2hunter2 in .env",
        tool_calls=[
            ToolCall(
                "bash",
                {
                    "command": "curl -H 'Authorization: Bearer abcdef0123456789abcdef'",
                    "env": {"GITHUB_TOKEN": "ghp_bSh2Cde2wioVMEuUYMjPeFXsRgZzCYTHY2Iv"},
                    "args": ["--password", "s3cret-value"],
                },
                output="connected to postgres://app:pw-in-output-42@db/app",
            )
        ],
    )
    captured = build_messages(turn, config(capture_tool_results=True))
    everything = "".join(dump(m) for m in captured.messages)
    for secret in (
        "sk-proj-4f9Qx7Lm2Zt8Rb6Wc1Yd3Ke5",
        "hunter2hunter2",
        "abcdef0123456789abcdef",
        "ghp_bSh2Cde2wioVMEuUYMjPeFXsRgZzCYTHY2Iv",
        "pw-in-output-42",
    ):
        assert secret not in everything
    assert captured.messages[0].content == "Use OPENAI_API_KEY=[REDACTED] for the evals"
    part = assistant_parts(captured.messages)[1]
    assert part.tool_input["env"] == {"GITHUB_TOKEN": "[REDACTED]"}
    assert part.tool_output == "connected to postgres://app:[REDACTED]@db/app"
    # An argv list: the flag and its value are two items.
    assert part.tool_input["args"] == ["--password", "[REDACTED]"]


def test_a_secret_cut_by_the_cap_is_still_redacted() -> None:
    secret = "ghp_bSh2Cde2wioVMEuUYMjPeFXsRgZzCYTHY2Iv"
    output = "x" * (TOOL_OUTPUT_CAP - 11) + "\n" + secret + " and more" * 100
    turn = Turn(0, user="Print the token file", tool_calls=[ToolCall("cat", {}, output=output)])
    part = assistant_parts(build_messages(turn, config(capture_tool_results=True)).messages)[1]
    assert secret[:10] not in part.tool_output
    assert part.tool_output.endswith("…[truncated]")


# --- host message lists -------------------------------------------------------------------------


def test_openai_chat_messages() -> None:
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Earlier prompt"},
        {"role": "assistant", "content": "Earlier answer"},
        {"role": "user", "content": f"{RECALL}\n\nFix the failing test"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "t.py"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "bash", "arguments": "not json"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "1 failed"},
        {"role": "tool", "tool_call_id": "c1", "content": "def test(): ..."},
        {"role": "assistant", "content": "Fixed the off-by-one."},
    ]
    turn = turn_from_messages(messages, 5)
    assert turn.index == 5
    assert turn.user == f"{RECALL}\n\nFix the failing test"
    assert turn.assistant == "Let me look.\n\nFixed the off-by-one."
    assert turn.tool_calls == [
        ToolCall("read", {"path": "t.py"}, output="def test(): ...", id="c1"),
        ToolCall("bash", {"arguments": "not json"}, output="1 failed", id="c2"),
    ]


def test_openai_legacy_function_call_pairs_by_name() -> None:
    messages = [
        {"role": "user", "content": "What's the weather like in Paris today"},
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "weather", "arguments": '{"city": "Paris"}'},
        },
        {"role": "function", "name": "weather", "content": "sunny"},
    ]
    turn = turn_from_messages(messages, 0)
    assert turn.tool_calls == [ToolCall("weather", {"city": "Paris"}, output="sunny")]


def test_anthropic_content_blocks() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Run the linter and fix issues"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "private reasoning", "signature": "x"},
                {"type": "text", "text": "Running ruff."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "bash",
                    "input": {"command": "ruff check ."},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": True,
                    "content": [{"type": "text", "text": "E501"}],
                },
                {"type": "text", "text": "<system-reminder>todo</system-reminder>"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Fixed E501."}]},
    ]
    turn = turn_from_messages(messages, 2)
    assert turn.user == "Run the linter and fix issues"  # the tool_result message is no prompt
    assert turn.assistant == "Running ruff.\n\nFixed E501."
    assert turn.tool_calls == [
        ToolCall("bash", {"command": "ruff check ."}, output="E501", status="error", id="toolu_1")
    ]


def test_pi_tool_results() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "List the repo files please"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "call_9", "name": "ls", "arguments": {"path": "."}}
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "call_9",
            "toolName": "ls",
            "content": [
                {"type": "text", "text": "README.md\nsrc"},
                {"type": "image", "data": "..."},
            ],
            "isError": False,
        },
    ]
    turn = turn_from_messages(messages, 0)
    assert turn.tool_calls == [
        ToolCall("ls", {"path": "."}, output="README.md\nsrc\n[image]", id="call_9")
    ]


ROLE_SPELLINGS = [
    "tool",
    "toolResult",
    "tool_result",
    "tool-result",
    "TOOL_RESULT",
    "function",
    "functionResult",
    "function_response",
    "tool_response",
    "toolOutput",
    "ipython",
]


@pytest.mark.parametrize("role", ROLE_SPELLINGS)
@pytest.mark.parametrize("id_key", ["tool_call_id", "toolCallId", "tool_use_id", "call_id"])
def test_every_tool_result_role_spelling_is_paired(role: str, id_key: str) -> None:
    messages = [
        {"role": "user", "content": "Read both config files"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "a", "function": {"name": "read", "arguments": '{"path": "a.toml"}'}},
                {"id": "b", "function": {"name": "read", "arguments": '{"path": "b.toml"}'}},
            ],
        },
        {"role": role, id_key: "b", "content": "B"},
        {"role": role, id_key: "a", "content": "A"},
    ]
    turn = turn_from_messages(messages, 0)
    assert [(c.id, c.output, c.status) for c in turn.tool_calls] == [
        ("a", "A", "completed"),
        ("b", "B", "completed"),
    ]
    captured = build_messages(turn, config(capture_tool_results=True))
    assert [p.tool_output for p in assistant_parts(captured.messages)[1:]] == ["A", "B"]


def test_gemini_parts() -> None:
    messages = [
        {"role": "user", "parts": [{"text": "Find the TODOs in src"}]},
        {
            "role": "model",
            "parts": [{"functionCall": {"name": "grep", "args": {"pattern": "TODO"}}}],
        },
        {
            "role": "function",
            "parts": [{"functionResponse": {"name": "grep", "response": {"result": "3 matches"}}}],
        },
        {"role": "model", "parts": [{"text": "Found 3."}]},
    ]
    turn = turn_from_messages(messages, 0)
    assert turn.user == "Find the TODOs in src"
    assert turn.assistant == "Found 3."
    assert turn.tool_calls == [ToolCall("grep", {"pattern": "TODO"}, output="3 matches")]


def test_openai_responses_items_pair_by_call_id() -> None:
    items = [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Check the CI status"}],
        },
        {"type": "reasoning", "summary": []},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "ci",
            "arguments": "{}",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "green"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "CI is green."}],
        },
    ]
    turn = turn_from_messages(items, 0)
    assert turn.assistant == "CI is green."
    assert turn.tool_calls == [ToolCall("ci", {}, output="green", id="call_1")]


def test_vercel_ai_sdk_parts() -> None:
    messages = [
        {"role": "user", "content": "Deploy the preview build"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool-call",
                    "toolCallId": "v1",
                    "toolName": "deploy",
                    "args": {"env": "preview"},
                }
            ],
        },
        {
            "role": "tool",
            "content": [
                {"type": "tool-result", "toolCallId": "v1", "toolName": "deploy", "result": "ok"}
            ],
        },
    ]
    turn = turn_from_messages(messages, 0)
    assert turn.tool_calls == [ToolCall("deploy", {"env": "preview"}, output="ok", id="v1")]


def test_unpaired_calls_and_orphan_results() -> None:
    messages = [
        {"role": "user", "content": "Start the dev server please"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "s1", "function": {"name": "serve", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "zz", "name": "watch", "content": "changed"},
    ]
    turn = turn_from_messages(messages, 0)
    assert turn.tool_calls == [
        ToolCall("serve", {}, status="running", id="s1"),
        ToolCall("watch", {}, output="changed", id="zz"),
    ]


def test_the_last_prompt_starts_the_turn() -> None:
    messages = [
        {"role": "user", "content": "First prompt here"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "Second prompt here"},
        {"role": "assistant", "content": "second answer"},
        {"role": "user", "content": "<system-reminder>injected by the host</system-reminder>"},
        {"role": "assistant", "content": "more of the second answer"},
    ]
    turn = turn_from_messages(messages, 1)
    assert turn.user == "Second prompt here"
    assert turn.assistant == "second answer\n\nmore of the second answer"


def test_no_prompt_at_all() -> None:
    turn = turn_from_messages([{"role": "assistant", "content": "hello"}, "junk", 3], 0)
    assert turn == Turn(0, user="", assistant="hello")
    assert build_messages(turn, config()).decision.reason == "empty"


def test_message_objects_with_model_dump() -> None:
    class Obj:
        def __init__(self, data: dict[str, Any]) -> None:
            self.data = data

        def model_dump(self) -> dict[str, Any]:
            return self.data

    turn = turn_from_messages([Obj({"role": "user", "content": "Explain the breaker states"})], 0)
    assert turn.user == "Explain the breaker states"


def test_tool_result_role_end_to_end() -> None:
    """The pi extension's bug: results stored as role "toolResult" were never captured."""
    messages = [
        {"role": "user", "content": "Show me the failing test output"},
        {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "x1", "name": "bash", "arguments": {"command": "pytest"}}
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "x1",
            "toolName": "bash",
            "content": [{"type": "text", "text": "FAILED test_a"}],
        },
    ]
    captured = build_messages(turn_from_messages(messages, 0), config(capture_tool_results=True))
    parts = assistant_parts(captured.messages)
    assert parts[0].text == "[assistant used tools: bash]"
    assert parts[1].tool_output == "FAILED test_a"


# --- properties ---------------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        RECALL,
        "<relevant-memories>",
        "</relevant-memories>",
        "<RELEVANT-MEMORIES>",
        "<relevant-memories foo='1'>",
        "<system-reminder>",
        "</system-reminder>",
        "<openviking-context>",
        "</memory-context>",
        "[Subagent Context] spawned by parent",
        "- [memory 0.80] Falcon uses Go",
        "\n\n",
        "\x00",
        " ",
        "Fix the build",
        "I prefer uv",
        "password=hunter2",
        "汉字",
        "?",
        "/help",
    ]
)
_TEXT = st.lists(_PIECES | st.text(max_size=8), max_size=12).map("".join)
_CALLS = st.lists(
    st.builds(
        ToolCall,
        name=st.sampled_from(["read", "edit", "bash"]),
        input=st.dictionaries(st.sampled_from(["path", "command", "content"]), _TEXT, max_size=3),
        output=_TEXT,
        status=st.sampled_from(["completed", "error", "running"]),
    ),
    max_size=3,
)
_CONFIGS = st.builds(
    OVConfig,
    capture_tool_results=st.booleans(),
    capture_mode=st.sampled_from(["semantic", "keyword"]),
    capture_assistant_turns=st.booleans(),
)


@settings(max_examples=40, deadline=None, database=None)
@given(_TEXT, _TEXT, _CALLS, _CONFIGS)
def test_build_never_raises_nor_emits_recall_blocks(
    user: str, assistant: str, calls: list[ToolCall], cfg: OVConfig
) -> None:
    captured = build_messages(Turn(0, user=user, assistant=assistant, tool_calls=calls), cfg)
    assert captured.tokens >= 0
    assert (captured.messages == []) == (not captured.decision.capture)
    for message in captured.messages:
        text = dump(message).lower()
        assert "<relevant-memories" not in text.replace("<relevant-memories\\", "")
        assert "relevant-memories>" not in text
        assert "\\u0000" not in text


@settings(max_examples=40, deadline=None, database=None)
@given(_TEXT, _TEXT, _CALLS, _CONFIGS)
def test_stripping_first_changes_nothing(
    user: str, assistant: str, calls: list[ToolCall], cfg: OVConfig
) -> None:
    raw = build_messages(Turn(0, user=user, assistant=assistant, tool_calls=calls), cfg)
    stripped = build_messages(
        Turn(0, user=clean_text(user), assistant=clean_text(assistant), tool_calls=calls), cfg
    )
    assert stripped == raw


@settings(max_examples=60, deadline=None, database=None)
@given(_TEXT)
def test_captured_user_text_is_a_fixpoint(user: str) -> None:
    first = build_messages(Turn(0, user=user), OVConfig())
    assume(first.decision.capture)
    content = first.messages[0].content
    assert content is not None
    again = build_messages(Turn(0, user=content), OVConfig())
    assert again.messages == first.messages
    assert again.tokens == first.tokens


@settings(max_examples=100, deadline=None, database=None)
@given(st.text())
def test_clean_text_is_idempotent(text: str) -> None:
    once = clean_text(text)
    assert clean_text(once) == once
