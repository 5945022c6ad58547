"""Who is calling: dev-mode identity headers, or API keys (root and per-user).

- **dev** (no root key): ``X-OpenViking-Account`` / ``X-OpenViking-User`` name the caller
  (default ``default``/``default``); no key is checked. For loopback use only: ``serve``
  refuses other hosts without a root key.
- **api_key** (root key configured): ``Authorization: Bearer <key>`` or ``X-API-Key``. The
  root key may call system and admin routes and gets 403 on data routes; user keys come from
  the admin routes and name their account and user (headers are ignored). Only a SHA-256 hash
  of each user key is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .errors import ApiError, already_exists, invalid_argument, not_found, permission_denied
from .store import Store
from .util import now

__all__ = ["Access", "Authenticator", "Identity", "check_id"]

Access = Literal["system", "admin", "data"]

_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,127}$")
ROOT_DATA_DENIED = (
    "ROOT API keys cannot access tenant-scoped data APIs in api_key mode. Use a user/admin "
    "API key for data access, or trusted mode for upstream identity assertion."
)
DEV_ADMIN_DENIED = (
    "Admin API requires api_key mode with root_api_key configured. Development mode does not "
    'support account or user management. You should set server.auth_mode = "api_key" in '
    "ov.conf"
)


@dataclass(frozen=True)
class Identity:
    """The caller: account, user and role (``root`` | ``admin`` | ``user``)."""

    account: str
    user: str
    role: str

    @property
    def is_root(self) -> bool:
        return self.role == "root"


def check_id(value: str, what: str) -> str:
    """An account or user id usable as one path segment, else 400."""
    if not _ID.match(value) or value in (".", ".."):
        raise invalid_argument(f"{what} must be alpha_numeric string.")
    return value


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _unauthenticated(message: str) -> ApiError:
    return ApiError(401, "UNAUTHENTICATED", message)


class Authenticator:
    """Resolves identities and manages accounts and user keys."""

    def __init__(self, store: Store, root_api_key: str | None):
        self._store = store
        self._root = root_api_key or None

    @property
    def mode(self) -> str:
        return "api_key" if self._root else "dev"

    @staticmethod
    def presented_key(headers: Mapping[str, str]) -> str | None:
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer " and auth[7:].strip():
            return auth[7:].strip()
        return headers.get("x-api-key") or None

    def identify(self, headers: Mapping[str, str], access: Access) -> Identity:
        """The caller of a route of class ``access``; 400/401/403 when not allowed."""
        if self._root is None:
            if access == "admin":
                raise permission_denied(DEV_ADMIN_DENIED)
            account = check_id(headers.get("x-openviking-account") or "default", "account_id")
            user = check_id(headers.get("x-openviking-user") or "default", "user_id")
            return Identity(account, user, "admin")
        identity = self.from_key(self.presented_key(headers))
        if identity.is_root and access == "data":
            raise permission_denied(ROOT_DATA_DENIED)
        return identity

    def from_key(self, key: str | None) -> Identity:
        if not key:
            raise _unauthenticated("Missing API Key when resolving identity.")
        if self._root and hmac.compare_digest(key.encode(), self._root.encode()):
            return Identity("default", "default", "root")
        row = self._store.one(
            "SELECT account_id, user_id, role FROM users WHERE key_hash = ?", (_hash(key),)
        )
        if row is None:
            raise _unauthenticated("Invalid API key")
        return Identity(row["account_id"], row["user_id"], row["role"])

    # --- admin --------------------------------------------------------------------------------

    def create_account(self, account_id: str, admin_user_id: str) -> str:
        """A new account with its admin; returns the admin's key (shown once)."""
        check_id(account_id, "account_id")
        check_id(admin_user_id, "user_id")
        key = secrets.token_urlsafe(32)
        with self._store.transaction():
            if self._store.one("SELECT 1 FROM accounts WHERE account_id = ?", (account_id,)):
                raise already_exists(f"Account already exists: {account_id}", account_id, "account")
            self._store.run("INSERT INTO accounts VALUES (?, ?)", (account_id, now()))
            self._insert_user(account_id, admin_user_id, "admin", key)
        return key

    def register_user(self, caller: Identity, account_id: str, user_id: str, role: str) -> str:
        """Add a user to an account (root, or an admin of that account); returns its key."""
        if not caller.is_root and not (caller.role == "admin" and caller.account == account_id):
            raise permission_denied("Requires role: root, admin")
        check_id(user_id, "user_id")
        if role not in ("user", "admin"):
            raise invalid_argument(f"Invalid role: {role}")
        key = secrets.token_urlsafe(32)
        with self._store.transaction():
            if not self._store.one("SELECT 1 FROM accounts WHERE account_id = ?", (account_id,)):
                raise not_found(f"Account not found: {account_id}", "account", account_id)
            if self._store.one(
                "SELECT 1 FROM users WHERE account_id = ? AND user_id = ?", (account_id, user_id)
            ):
                raise already_exists(f"User already exists: {user_id}", user_id, "user")
            self._insert_user(account_id, user_id, role, key)
        return key

    def _insert_user(self, account_id: str, user_id: str, role: str, key: str) -> None:
        self._store.run(
            "INSERT INTO users VALUES (?, ?, ?, ?, ?)",
            (account_id, user_id, role, _hash(key), now()),
        )

    def remove_user(self, caller: Identity, account_id: str, user_id: str) -> None:
        if not caller.is_root and not (caller.role == "admin" and caller.account == account_id):
            raise permission_denied("Requires role: root, admin")
        removed = self._store.run(
            "DELETE FROM users WHERE account_id = ? AND user_id = ?", (account_id, user_id)
        )
        if not removed:
            raise not_found(f"User not found: {user_id}", "user", user_id)

    def accounts(self) -> list[dict[str, object]]:
        rows = self._store.all(
            "SELECT a.account_id, a.created_at, COUNT(u.user_id) AS users FROM accounts a "
            "LEFT JOIN users u ON u.account_id = a.account_id GROUP BY a.account_id "
            "ORDER BY a.account_id"
        )
        return [{"account_id": r["account_id"], "user_count": r["users"]} for r in rows]

    def users(self, caller: Identity, account_id: str) -> list[dict[str, object]]:
        if not caller.is_root and not (caller.role == "admin" and caller.account == account_id):
            raise permission_denied("Requires role: root, admin")
        rows = self._store.all(
            "SELECT user_id, role FROM users WHERE account_id = ? ORDER BY user_id", (account_id,)
        )
        return [{"user_id": r["user_id"], "role": r["role"]} for r in rows]
