"""One preflight finding: PASS, WARN or FAIL, what was checked, what was found, how to fix it."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal

from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

from tools.stack import AWS_ERRORS, one_line

Status = Literal["PASS", "WARN", "FAIL"]
SEVERITY: dict[Status, int] = {"PASS": 0, "WARN": 1, "FAIL": 2}


@dataclass(frozen=True)
class Result:
    status: Status
    check: str
    found: str
    fix: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    """Figures for --json (prices, hours); never a secret."""

    def line(self) -> str:
        return f"{self.status:<4}  {self.check:<13} {self.found}" + (f"; fix: {self.fix}" if self.fix else "")

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v or k in ("status", "check", "found")}


def worst(statuses: list[Status]) -> Status:
    return max(statuses, key=SEVERITY.__getitem__, default="PASS")


# What a check raises when it could not reach its API or was not allowed to call it.
UNREACHABLE = (*AWS_ERRORS, OSError)


# Error codes AWS answers when the caller lacks a permission (IAM: AccessDenied; most JSON APIs:
# AccessDeniedException; EC2: UnauthorizedOperation).
NOT_PERMITTED = ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation")
NETWORK_ERRORS = (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, OSError)
NETWORK_FIX = "check the network path to AWS (proxy, VPN, firewall, AWS_ENDPOINT_URL)"


def unreachable(check: str, fix: str, error: BaseException) -> Result:
    """A WARN "could not verify" that says which of the two it was: the API could not be reached
    (the network), or it answered that the caller may not call it (a permission to add)."""
    if isinstance(error, ClientError) and error.response.get("Error", {}).get("Code") in NOT_PERMITTED:
        return Result("WARN", check, f"could not verify: not permitted: {one_line(error)}", fix)
    if isinstance(error, NETWORK_ERRORS):
        return Result("WARN", check, f"could not verify: could not reach the API (network): {one_line(error)}", NETWORK_FIX)
    return Result("WARN", check, f"could not verify: {one_line(error)}", fix)


def guarded(check: str, fix: str, run: Callable[[], Result]) -> Result:
    """Run a check; an API it could not reach or was not permitted to call is a WARN "could not
    verify" with the error, never a traceback. Only a verified negative is a FAIL."""
    try:
        return run()
    except UNREACHABLE as error:
        return unreachable(check, fix, error)
