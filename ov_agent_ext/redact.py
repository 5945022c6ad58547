"""Secret redaction: what leaves the machine for the memory store must not carry credentials.

A captured turn is stored, extracted into memories and re-injected into later prompts (and
other agents' prompts), so a key pasted into a chat or printed by a tool would otherwise live
on in memory. :func:`redact` replaces secret *values* with ``[REDACTED]`` and keeps everything
around them, so the memory stays useful: ``OPENAI_API_KEY=[REDACTED]``,
``postgres://app:[REDACTED]@db:5432/app``, ``Authorization: Bearer [REDACTED]``.

What counts as a secret (each rule is one precompiled pattern; it runs on every turn):

- *Known token shapes*, anywhere: OpenAI (``sk-``, ``sk-proj-``; must contain a digit),
  Anthropic (``sk-ant-``), GitHub (``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``,
  ``github_pat_``), GitLab (``glpat-``), AWS access key ids (``AKIA``/``ASIA``), Slack
  (``xox[abprs]-``, webhook URLs), Google (``AIza``), Stripe secret and restricted keys
  (``sk_live_``/``rk_live_``, ``_test_`` too), Hugging Face (``hf_``), npm (``npm_``), JWTs.
- *Private key blocks* (``-----BEGIN ... PRIVATE KEY-----`` to its END line, or over the
  base64 lines when a capped output cut the END off): the body goes, the armour lines stay.
- *Credentials in URLs*: ``scheme://user:PASSWORD@host`` keeps the user and host.
- *Authorization headers and bearer tokens*: ``Authorization: <scheme> X``, ``Bearer X``
  (a token with a digit).
- *Assignments whose key names a secret*: ``.env`` lines, YAML, JSON (escaped too), INI,
  shell, Python keyword arguments, URL query parameters, ``--flag value`` (``API_KEY=...``,
  ``DB_PASSWORD: ...``, ``export GITHUB_TOKEN=...``, ``"secret": "..."``,
  ``?access_token=...``). A key names a secret (:func:`names_secret`) when one of its words
  (split on ``_ - .`` and camelCase) is password, passwd, pwd, passphrase, passcode, secret,
  token, apikey or credential(s), or "pass" as the last of several words (``DB_PASS``), or
  "key" after api/access/private/secret/signing/client/...; not when another word names
  something about the secret rather than the secret (``_url``, ``_file``, ``_path``,
  ``_name``, ``_type``, ``_id``, ``_count``, ``_threshold``, ``max_``, ...). A bare
  ``X_KEY`` counts only when its value looks generated (16+ characters, letters and digits).
- *Command lines and prose*: ``curl -u user:PASS``, ``mysql -pPASS``, SQL ``PASSWORD 'x'`` /
  ``IDENTIFIED BY 'x'``, netrc ``login u password X``, ``the password is "hunter2"``.

Deliberately left alone (``tests/fixtures/secrets/near_misses.txt``):

- prose that mentions a secret without a value ("the password reset flow");
- code that computes, passes or types one (``password = getpass()``,
  ``token = os.environ["GITHUB_TOKEN"]``, ``api_key=api_key``, ``self.token``,
  ``api_key: str | None``, ``backend: Backend``, ``{"apiKey": bad_key}``);
- names of variables that hold one (``--api-key ROOT_KEY``, ``"api_key": "OPENVIKING_API_KEY"``);
- placeholders and templates (``${API_KEY}``, ``$TOKEN``, ``$(cat key)``, ``<your-key>``,
  ``{{ secrets.X }}``, ``f"Bearer {api_key}"``, ``***``, stand-in words such as "password"
  or "changeme", and ``[REDACTED]`` itself, so redaction is idempotent);
- values under four characters, numbers (unless the key names a password: a PIN), and
  paths (``SSH_KEY=~/.ssh/id_ed25519``);
- high-entropy text with neither a known shape nor a secret-naming key: git SHAs, UUIDs,
  checksums, base64 data (``data:image/png;base64,...``), Stripe publishable keys
  (``pk_live_``, public by design). There is no entropy detection: it cannot tell a SHA or
  an image from a key, and memories full of ``[REDACTED]`` hashes are useless.

Not recognisable: a bare secret with no shape and no key (a password typed alone).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["REDACTED", "names_secret", "redact", "redact_value"]

REDACTED = "[REDACTED]"

# --- keys that name a secret --------------------------------------------------------------------

_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "pass",
        "passphrase",
        "passcode",
        "secret",
        "token",
        "apikey",
        "credential",
        "credentials",
        "privatekey",
        "accesskey",
        "secretkey",
    }
)
# "key" is a secret only next to one of these (api_key, accessKey, PRIVATE_KEY, ...).
_KEY_QUALIFIERS = frozenset(
    {
        "api",
        "access",
        "private",
        "secret",
        "signing",
        "encryption",
        "master",
        "app",
        "client",
        "account",
        "service",
        "session",
        "license",
        "deploy",
        "webhook",
        "auth",
    }
)
# A key that also names one of these is about the secret, not the secret itself.
_NOT_THE_SECRET = frozenset(
    {
        "url",
        "uri",
        "endpoint",
        "host",
        "hostname",
        "path",
        "file",
        "filename",
        "dir",
        "id",
        "name",
        "type",
        "count",
        "limit",
        "length",
        "len",
        "size",
        "budget",
        "threshold",
        "interval",
        "window",
        "usage",
        "estimate",
        "ttl",
        "timeout",
        "expiry",
        "expires",
        "expiration",
        "lifetime",
        "field",
        "header",
        "prefix",
        "suffix",
        "label",
        "format",
        "hint",
        "policy",
        "rate",
        "max",
        "min",
        "num",
        "total",
        "env",
        "var",
        "mode",
        "method",
        "strategy",
        "scope",
        "scopes",
        "version",
        "reset",
        "rotation",
        "manager",
        "provider",
        "strength",
        "prompt",
        "placeholder",
        "pattern",
        "regex",
        "required",
        "enabled",
        "error",
        "message",
        "column",
        "input",
    }
)
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _key_words(key: str) -> list[str]:
    return [w.lower() for w in _WORDS.findall(key)]


def names_secret(key: str) -> bool:
    """Whether a key (variable, field, header, flag name) names a secret value.

    >>> names_secret("OPENAI_API_KEY"), names_secret("dbPassword"), names_secret("max_tokens")
    (True, True, False)
    """
    words = _key_words(key)
    if not words or any(w in _NOT_THE_SECRET for w in words):
        return False
    # "pass" is a common word ("1st pass: check", pass_rate, pass_through): it names a secret
    # only as the last word after another one (DB_PASS, smtpPass).
    last = len(words) - 1
    if any(w in _SECRET_WORDS and (w != "pass" or 0 < i == last) for i, w in enumerate(words)):
        return True
    return any(
        w == "key" and i > 0 and words[i - 1] in _KEY_QUALIFIERS for i, w in enumerate(words)
    )


def _names_bare_key(key: str) -> bool:
    """``STRIPE_KEY``, ``mapbox-key``: secret only if the value looks random."""
    words = _key_words(key)
    return len(words) > 1 and words[-1] == "key" and not any(w in _NOT_THE_SECRET for w in words)


# --- values that are not secrets ----------------------------------------------------------------

_PLACEHOLDER = re.compile(
    r"""^(?:
        \$\{?[A-Za-z_][A-Za-z0-9_]*(?::?[-=?][^}]*)?\}?   # $VAR, ${VAR}, ${VAR:-default}
      | \$\(.*                                          # $(command ...)
      | %\(?[A-Za-z_][A-Za-z0-9_]*\)?s?%?               # %VAR%, %(name)s
      | <[^<>]*>                                        # <your-api-key>
      | \{\{.*\}\}                                      # {{ secrets.X }}
      | \[[A-Za-z _-]*\]                                # [REDACTED], [hidden]
      | [*•·.…xX_-]{1,}                                 # ****, xxxx, ..., ____
      | your[_-].* | redacted | hidden | masked | changeme_placeholder
    )$""",
    re.VERBOSE | re.IGNORECASE,
)
# Words that, unquoted after a secret-named key, are code or a type, not a value.
_CODE_WORDS = frozenset(
    {
        "none",
        "null",
        "nil",
        "undefined",
        "true",
        "false",
        "str",
        "string",
        "int",
        "integer",
        "bytes",
        "bool",
        "boolean",
        "float",
        "number",
        "any",
        "object",
        "secretstr",
        "secretbytes",
        "secret",
        "optional",
        "await",
        "new",
        "lambda",
        "function",
        "self",
        "this",
        "required",
        "if",
        "and",
        "or",
        "not",
        "is",
        "in",
        "the",
        "a",
        "an",
    }
)
_STAND_INS = frozenset(
    {
        "password",
        "passwd",
        "pass",
        "secret",
        "token",
        "key",
        "apikey",
        "api_key",
        "api-key",
        "value",
        "placeholder",
        "example",
        "redacted",
        "hidden",
        "masked",
        "none",
        "null",
        "changeme",
    }
)
_MIN_SECRET = 4  # nothing shorter is a credential ("f" of f"Bearer {key}", "x/y" in prose)
# A template that a program fills in: f"Bearer {api_key}", "${DB_PASSWORD}", "{{ secret }}".
_TEMPLATE = re.compile(r"\{[A-Za-z_][\w.\[\]'\"()]*\}|\$\{|\{\{|%\(\w+\)s|%s")
_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "pass", "passphrase", "passcode"})
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PASCAL_CASE = re.compile(r"^(?:[A-Z][a-z]+)+$")
_DOTTED_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_PATHLIKE = re.compile(r"^(?:~/|\./|\.\./|[A-Za-z]:\\)|^/[\w./-]+$")


def _is_path(value: str) -> bool:
    """A file path (``~/.ssh/id_rsa``, ``/run/secrets/db``), not a base64 secret that happens
    to start with a slash."""
    return bool(_PATHLIKE.match(value)) and not (value[0] == "/" and _looks_random(value))


def _is_placeholder(value: str) -> bool:
    """Not a value at all: empty, too short to be a credential, a template or a stand-in."""
    value = value.strip()
    return (
        len(value) < _MIN_SECRET
        or value.lower() in _STAND_INS
        or value.startswith(REDACTED)
        or not any(c.isalnum() for c in value)  # a mask: ****, ****/**/**, ---
        or bool(_PLACEHOLDER.match(value) or _TEMPLATE.search(value))
    )


def _looks_random(value: str) -> bool:
    """At least 16 characters mixing letters and digits: a generated token, not a word."""
    return (
        len(value) >= 16
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and " " not in value
    )


def _names_a_variable(value: str) -> bool:
    """``API_KEY``, ``alice_key``, ``access_token``: the name of a variable that holds a secret
    (an environment variable in docs and commands, a parameter in code), not the secret."""
    if not _IDENTIFIER.match(value) or not ("_" in value or value.isupper()):
        return False
    lowered = value.lower()
    return any(stem in lowered for stem in _STEMS)


def _is_code_reference(value: str) -> bool:
    """An unquoted value that computes or names the secret instead of being it."""
    if any(c in value for c in "()[]{}"):  # getpass(), os.environ["X"], Optional[str]
        return True
    if value.lower() in _CODE_WORDS:
        return True
    if _DOTTED_NAME.match(value):  # self.password, config.api_key, process.env.TOKEN
        return True
    return _names_a_variable(value)


def _keep_value(value: str, *, key: str, quoted: bool, strict: bool) -> bool:
    """Whether a value assigned to a secret-named key is left as it is (not a secret).

    ``strict``: a ``.env`` line, whose value is a literal string, never code.
    """
    if _is_placeholder(value) or _is_path(value):
        return True
    if value.isdigit():  # a numeric setting, unless the key names a password (a PIN)
        return not any(w in _PASSWORD_WORDS for w in _key_words(key))
    if strict:
        return False
    if _names_a_variable(value):  # "api_key": "OPENVIKING_API_KEY", --api-key ROOT_KEY
        return True
    return not quoted and _is_code_reference(value)


# --- the patterns -------------------------------------------------------------------------------
#
# Every pattern starts with a literal character and checks what precedes it with a lookbehind
# placed *after* that character (``s(?<![\w-]s)k-``): the regex engine then scans for the
# literal at C speed instead of trying an assertion at every position (20-60x faster).


def _start(first: str, before: str = "A-Za-z0-9_-") -> str:
    """``first``, not preceded by a character of ``before`` (a token boundary)."""
    return f"{first}(?<![{before}]{first})"


_TOKENS = re.compile(
    "|".join(
        (
            rf"(?P<openai>{_start('s')}k-(?:ant-|proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{{20,}})",
            rf"{_start('g')}h[pousr]_[A-Za-z0-9]{{36,255}}(?![A-Za-z0-9_])",
            rf"{_start('g')}ithub_pat_[A-Za-z0-9_]{{22,255}}",
            rf"{_start('g')}lpat-[A-Za-z0-9_-]{{20,}}",
            rf"{_start('A', 'A-Za-z0-9+/')}(?:KIA|SIA)[A-Z0-9]{{16}}(?![A-Za-z0-9+/])",
            rf"{_start('x')}ox[abprs]-[A-Za-z0-9-]{{10,}}",
            r"T(?<=hooks\.slack\.com/services/T)[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+",
            rf"{_start('A')}Iza[0-9A-Za-z_-]{{35}}(?![A-Za-z0-9_-])",
            rf"{_start('s')}k_(?:live|test)_[A-Za-z0-9]{{16,}}",
            rf"{_start('r')}k_(?:live|test)_[A-Za-z0-9]{{16,}}",
            rf"{_start('h')}f_[A-Za-z0-9]{{30,}}(?![A-Za-z0-9_-])",
            rf"{_start('n')}pm_[A-Za-z0-9]{{36}}(?![A-Za-z0-9_-])",
            rf"{_start('e')}yJ[A-Za-z0-9_-]{{10,}}\.[A-Za-z0-9_-]{{10,}}\.[A-Za-z0-9_-]{{10,}}",
        )
    )
)
_TOKEN_NEEDLES = (
    "sk-", "gh", "glpat-", "akia", "asia", "xox", "hooks.slack", "aiza", "sk_", "rk_",
    "hf_", "npm_", "eyj",
)  # fmt: skip

_PRIVATE_KEY = re.compile(
    r"(?P<begin>-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----)"
    # The body runs to the END line (never across another "-----": bounded, linear), or, when a
    # cap cut the END off, over the base64 lines that follow.
    r"(?:(?:[^-]|-(?!----)){0,16384}?(?P<end>-----END (?P=label)-----)"
    r"|(?:[ \t]*(?:\r?\n|\\n)[A-Za-z0-9+/=:,. \t-]*)+)",
)
# scheme://user:PASSWORD@host (the scheme is checked by the lookbehind; the user may be empty)
_URL_PASSWORD = re.compile(
    r"(?P<lead>:(?<=[A-Za-z0-9]:)//[^\s:/?#@\"'<>]{0,128}:)(?P<value>[^\s@/\"'<>]{1,256})(?=@)"
)
_AUTHORIZATION = re.compile(
    rf"(?P<lead>{_start('[Aa]', 'A-Za-z0-9_')}(?i:uthorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?i:(?:bearer|basic|token|digest|apikey|api-key|bot)[ \t]+)?)"
    r"(?P<value>[^\s\"'`,;]+)"
)
_BEARER = re.compile(
    rf"(?P<lead>{_start('[Bb]', 'A-Za-z0-9_')}(?i:earer)[ \t]+)(?P<value>[A-Za-z0-9._~+/=-]{{16,}})"
)
_CURL_USER = re.compile(
    rf"(?P<lead>{_start('-', 'A-Za-z0-9_-')}(?:u|-user)[ \t]+[\"']?[^\s:\"']+:)"
    r"(?P<value>[^\s\"'`]+)"
)
_MYSQL_P = re.compile(
    rf"(?P<lead>{_start('m', 'A-Za-z0-9_')}(?:ysql(?:dump|admin)?|ariadb)\b[^\n]*?\s-p)"
    r"(?P<value>[^\s`-][^\s`]*)"
)
_SQL_PASSWORD = re.compile(
    rf"(?P<lead>(?:{_start('[Pp]', 'A-Za-z0-9_')}(?i:assword)|{_start('[Ii]', 'A-Za-z0-9_')}"
    r"(?i:dentified[ \t]+by))(?:[ \t]+|[ \t]*=[ \t]*)')(?P<value>[^'\n]+)(?=')"
)
_NETRC = re.compile(
    rf"(?P<lead>{_start('l', 'A-Za-z0-9_')}ogin[ \t]+\S+[ \t]+password[ \t]+)(?P<value>[^\s`]+)"
)

# The rules below name a secret by its key, so they run only on lines holding one of these.
_STEMS = ("pass", "pwd", "secret", "token", "key", "credential", "auth")
_FLAG = re.compile(
    rf"(?P<lead>{_start('-', 'A-Za-z0-9_-')}-?(?P<key>[A-Za-z][A-Za-z0-9-]{{0,40}})[ \t]+)"
    r"(?P<value>\"[^\"\n]{0,1000}\"|'[^'\n]{0,1000}'|[^\s\"'`-][^\s\"'`]{0,1000})"
)
_SAID = re.compile(
    rf"(?P<lead>(?:{_start('[Pp]', 'A-Za-z0-9_')}(?i:ass(?:word|phrase|code))"
    rf"|{_start('[Aa]', 'A-Za-z0-9_')}(?i:pi[ _-]?key)|{_start('[Tt]', 'A-Za-z0-9_')}(?i:oken)"
    rf"|{_start('[Ss]', 'A-Za-z0-9_')}(?i:ecret))"
    r"[ \t]+(?i:is|was|:)[ \t]+(?P<q>[\"'`]))(?P<value>[^\"'`\n]{1,200})(?=(?P=q))"
)
# key = value, key: value, "key": "value", --key=value, ?key=value. The key is a whole run of
# name characters (taken atomically: a lookahead capture, then its backreference); the value
# sits in a lookahead, so a value that is kept is scanned again for the next assignment
# ("token_type=bearer,password=x"). names_secret() decides on the key's words.
_ASSIGN = re.compile(
    r"(?P<line>^[ \t]*(?:export[ \t]+)?)?"
    r"(?<![A-Za-z0-9_.-])(?P<kq>\\?[\"']?)"
    r"(?=(?P<key>[A-Za-z0-9_.-]{1,80}))(?P=key)"
    r"(?P=kq)(?P<sp1>[ \t]*)(?P<op>=|:)(?![=:])(?P<sp2>[ \t]*)"
    r"(?=(?P<value>\\\"(?:[^\"\\\n]|\\[^\"]){0,1000}\\\""
    r"|\"(?:[^\"\\\n]|\\.){0,1000}\"|'(?:[^'\\\n]|\\.){0,1000}'|`[^`\n]{0,1000}`"
    r"|[^\s\"'`&\\]{1,1000}))"
)
_ARGV_FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9_-]{0,40}$")
_TRAILING = ",;:.)}]>"
_QUOTES = ('\\"', '"', "'", "`")
_OPENERS = {")": "(", "]": "[", "}": "{", ">": "<"}


def _split_value(raw: str) -> tuple[str, str, str, bool]:
    """(opening quote, the value itself, what follows it, quoted) of a matched value."""
    for quote in _QUOTES:
        if len(raw) >= 2 * len(quote) and raw.startswith(quote) and raw.endswith(quote):
            return quote, raw[len(quote) : -len(quote)], quote, True
    inner = raw
    while inner and inner[-1] in _TRAILING:  # "abc)," ends a call; "[REDACTED]" is whole
        opener = _OPENERS.get(inner[-1])
        if opener and inner.count(opener) >= inner.count(inner[-1]):
            break
        inner = inner[:-1]
    return "", inner, raw[len(inner) :], False


def _sub_value(
    pattern: re.Pattern[str], keep: Callable[[re.Match[str]], bool]
) -> Callable[[str], str]:
    """A pass that replaces the ``value`` group of each match unless ``keep`` says otherwise."""

    def repl(match: re.Match[str]) -> str:
        if keep(match):
            return match.group(0)
        head, _, tail, _ = _split_value(match.group("value"))
        return match.group("lead") + head + REDACTED + tail

    return lambda text: pattern.sub(repl, text)


def _token_repl(match: re.Match[str]) -> str:
    value = match.group(0)
    # An OpenAI-shaped "sk-..." must look generated: "sk-learn-style-identifier" is not a key.
    if match.lastgroup == "openai" and not any(c.isdigit() for c in value):
        return value
    return REDACTED


def _private_key_repl(match: re.Match[str]) -> str:
    end = match.group("end") or f"-----END {match.group('label')}-----"
    # Inside a JSON string the key's newlines are "\\n" escapes: keep the string valid.
    newline = "\\n" if match.group(0)[len(match.group("begin")) :].startswith("\\n") else "\n"
    return f"{match.group('begin')}{newline}{REDACTED}{newline}{end}"


def _assign_keep(match: re.Match[str]) -> bool:
    key = match.group("key")
    lowered = key.lower()
    if not any(stem in lowered for stem in _STEMS):
        return True
    _, inner, _, quoted = _split_value(match.group("value"))
    if not inner:
        return True
    if not names_secret(key) and not (_names_bare_key(key) and _looks_random(inner)):
        return True
    if match.group("kq") and not quoted:
        return True  # {"apiKey": bad_key}: a quoted key with a bare value is code (or JSON null)
    if match.group("op") == ":":
        if key.startswith("-"):
            return True  # "without --api-key: dev mode" mentions a flag; flags take "=" or " "
        if not quoted and _PASCAL_CASE.match(inner):
            return True  # "backend: Backend", "api_key: SecretStr": a type annotation
    # A .env line (KEY=value at the line start, no spaces) holds a literal, never code.
    strict = (
        match.group("line") is not None
        and key.upper() == key
        and not match.group("sp1")
        and not match.group("sp2")
        and match.group("op") == "="
    )
    return _keep_value(inner, key=key, quoted=quoted, strict=strict)


def _assign_pass(text: str) -> str:
    out: list[str] = []
    pos = 0
    while (match := _ASSIGN.search(text, pos)) is not None:
        out.append(text[pos : match.end()])
        pos = match.end()
        if not _assign_keep(match):
            head, _, tail, _ = _split_value(match.group("value"))
            out.append(head + REDACTED + tail)
            pos = match.end("value")
    out.append(text[pos:])
    return "".join(out)


def _flag_keep(match: re.Match[str]) -> bool:
    _, inner, _, quoted = _split_value(match.group("value"))
    key = match.group("key")
    if not names_secret(key):
        return True
    return _keep_value(inner, key=key, quoted=quoted, strict=False)


def _placeholder_keep(match: re.Match[str]) -> bool:
    return _is_placeholder(match.group("value"))


_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "apikey", "api-key", "bot"})


def _authorization_keep(match: re.Match[str]) -> bool:
    # "`Authorization: Bearer` or `X-API-Key`" names the scheme, with no credential after it.
    value = match.group("value")
    return value.lower() in _AUTH_SCHEMES or _is_placeholder(value)


def _bearer_keep(match: re.Match[str]) -> bool:
    return not any(c.isdigit() for c in match.group("value"))


_GLOBAL_PASSES: tuple[tuple[tuple[str, ...], Callable[[str], str]], ...] = (
    # (lower-case substrings one of which must be in the text for the pass to run, the pass)
    (("private key",), lambda t: _PRIVATE_KEY.sub(_private_key_repl, t)),
    (("://",), _sub_value(_URL_PASSWORD, _placeholder_keep)),
    (_TOKEN_NEEDLES, lambda t: _TOKENS.sub(_token_repl, t)),
    (("authorization",), _sub_value(_AUTHORIZATION, _authorization_keep)),
    (("bearer",), _sub_value(_BEARER, _bearer_keep)),
    (("-u", "--user"), _sub_value(_CURL_USER, _placeholder_keep)),
    (("mysql", "mariadb"), _sub_value(_MYSQL_P, _placeholder_keep)),
    (("password", "identified"), _sub_value(_SQL_PASSWORD, _placeholder_keep)),
    (("login",), _sub_value(_NETRC, _placeholder_keep)),
)
_LINE_PASSES: tuple[Callable[[str], str], ...] = (
    _sub_value(_FLAG, _flag_keep),
    _sub_value(_SAID, _placeholder_keep),
    _assign_pass,
)


def redact(text: str) -> str:
    """``text`` with every recognised secret value replaced by ``[REDACTED]``; idempotent.

    >>> redact("export OPENAI_API_KEY=sk-proj-4f9Qx7Lm2Zt8Rb6Wc1Yd3Ke5Hn0Ja9Pv")
    'export OPENAI_API_KEY=[REDACTED]'
    >>> redact("postgres://app:s3cr3t-pw@db.internal:5432/app")
    'postgres://app:[REDACTED]@db.internal:5432/app'
    >>> redact("implement the password reset flow")
    'implement the password reset flow'
    """
    if not text:
        return text
    lower = text.lower()
    for needles, apply in _GLOBAL_PASSES:
        if any(n in lower for n in needles):
            text = apply(text)
    if not any(stem in lower for stem in _STEMS):
        return text
    # Redaction never adds or removes a line break outside private keys, which come first.
    lines = text.split("\n")
    for i, line_lower in enumerate(text.lower().split("\n")):
        if any(stem in line_lower for stem in _STEMS):
            line = lines[i]
            for apply_line in _LINE_PASSES:
                line = apply_line(line)
            lines[i] = line
    return "\n".join(lines)


def redact_value(value: Any) -> Any:
    """Redact strings inside nested dicts, lists and tuples (tool inputs); a string under a key
    that names a secret (``{"password": "..."}``) is replaced whole. Other values are kept.

    >>> redact_value({"env": {"DB_PASSWORD": "hunter2"}, "timeout": 30})
    {'env': {'DB_PASSWORD': '[REDACTED]'}, 'timeout': 30}
    >>> redact_value(["curl -H 'Authorization: Bearer abc123def456ghi789'"])
    ["curl -H 'Authorization: Bearer [REDACTED]'"]
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if (
                isinstance(key, str)
                and isinstance(item, str)
                and names_secret(key)
                and not _is_placeholder(item)
                and not _is_path(item)
            ):
                out[key] = REDACTED
            else:
                out[key] = redact_value(item)
        return out
    if isinstance(value, (list, tuple)):
        items = [redact_value(item) for item in value]
        # argv lists: ["psql", "--password", "hunter2"] (the flag and its value are two items)
        for i in range(len(items) - 1):
            flag, nxt = items[i], items[i + 1]
            if (
                isinstance(flag, str)
                and isinstance(nxt, str)
                and _ARGV_FLAG.match(flag)
                and names_secret(flag)
                and not nxt.startswith("-")
                and not _keep_value(nxt, key=flag, quoted=True, strict=False)
            ):
                items[i + 1] = REDACTED
        return items if isinstance(value, list) else tuple(items)
    return value
