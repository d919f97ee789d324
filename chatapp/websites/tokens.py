"""Guest tokens: what a widget keeps so that a reload or a later visit is the same guest.

A token is Django's signed, timestamped value (SECRET_KEY, a salt of its own) of the site's key,
the guest's id and the host page's origin. Nothing is stored for it: the signature proves the
server issued it, the timestamp bounds it (the site's retention), and the site key in it must
be the site it is shown to, so a token of site A opens nothing of site B.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from django.core import signing

_SALT = "chatapp.websites.guest-token"

TokenProblem = Literal["forged", "expired", "other_site"]

_MESSAGES: dict[TokenProblem, str] = {
    "forged": "This chat link is not valid. Start a new conversation.",
    "expired": "This conversation has expired. Start a new one.",
    "other_site": "This chat link belongs to another website. Start a new conversation.",
}


@dataclass(frozen=True, slots=True)
class GuestClaim:
    site_key: str
    guest_id: uuid.UUID
    origin: str


class TokenRefused(Exception):
    def __init__(self, problem: TokenProblem) -> None:
        super().__init__(_MESSAGES[problem])
        self.problem = problem
        self.message = _MESSAGES[problem]


def _signer() -> signing.TimestampSigner:
    # "." between the parts (not ":"): the token travels as a WebSocket subprotocol, which
    # must be an HTTP token; base64url and "." are.
    return signing.TimestampSigner(salt=_SALT, sep=".")


def guest_token(claim: GuestClaim) -> str:
    return _signer().sign_object({"s": claim.site_key, "g": str(claim.guest_id), "o": claim.origin})


def guest_claim(token: str, *, site_key: str, max_age_s: float) -> GuestClaim:
    """The claim a token makes for `site_key`, or TokenRefused saying why not."""
    try:
        value = _signer().unsign_object(token, max_age=max_age_s)
    except signing.SignatureExpired:
        raise TokenRefused("expired") from None
    except signing.BadSignature:
        raise TokenRefused("forged") from None
    try:
        claim = GuestClaim(str(value["s"]), uuid.UUID(str(value["g"])), str(value["o"]))
    except (TypeError, KeyError, ValueError):  # signed by us, shaped otherwise: never issued
        raise TokenRefused("forged") from None
    if claim.site_key != site_key:
        raise TokenRefused("other_site")
    return claim
