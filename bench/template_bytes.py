"""Bytes on the wire per templated `chat.send` vs sending the full text or the whole prompt.

Run from the repository root (the model folder is only read for its tokenizer and chat
template; default the app's SmolLM2 folder):

    .venv/bin/python -m bench.template_bytes [--model-dir DIR]

No database, no engine: for 5 customer-service templates (system prompts of 600-2500
characters, bodies with 1-3 variables), 3 sets of variable values each, and three user
behaviours

* (a) `variables`: the user fills in the variables and sends the rendered body as is;
* (b) `small edit`: a few words added to the rendered body;
* (c) `rewrite`: one sentence of the rendered body rewritten;

it builds the `chat.send` frame exactly as the browser does (`frontend/src/templates.ts`
`buildTemplatedSend` + `frontend/src/protocol.ts` `templatedSendFrame`, serialised like
`JSON.stringify`: no spaces, non-ASCII as UTF-8) and compares its UTF-8 size with

1. a plain `chat.send` carrying the full user text (what a template-less browser sends), and
   the same templated frame with the full `text` instead of the patch (`withFullText`, what
   the browser resends after `chat.resend_full`);
2. the full prompt text a client would otherwise have to send: the template's system prompt
   plus the final user message;
3. the whole prompt the model sees: the model's chat template rendered with the template's
   system prompt and the user message, exactly as the worker builds it
   (`bench.prompts.tokenizer_prompt_builder`: the worker's `PromptBuilder` on the folder's
   tokenizer), in bytes and in tokens.

Every frame is checked the way the server resolves it (`chatapp/prompts/resolution.py`): it
must validate as a `SendFrame`, the template hash must match, the variables must pass
`clean_values`, and for edits `apply_patch(rendered, patch)` must give back exactly the edited
text whose SHA-256 is `result_sha256`. Any mismatch aborts the run.

Results: a markdown table on stdout and in `bench/results/template_bytes-<timestamp>.md`, the
per-frame data in `.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from bench import harness
from bench.prompts import tokenizer_prompt_builder
from chatapp.prompts.rendering import (
    Sampling,
    Variable,
    canonical_text,
    clean_values,
    parse_sampling,
    parse_variables,
    render_body,
    sha256_hex,
)
from chatapp.prompts.textpatch import MAX_PATCH_CHARS, apply_patch, make_patch
from chatapp.prompts.textpatch import sha256_hex as text_sha256_hex
from chatapp.realtime.schemas import SendFrame, client_frame_adapter
from inference.models.paths import SMOLLM2_DIR_NAME
from inference.prompt_builder import PromptBuilder
from inference.wire.protocol import ChatTurn

MODULE = "bench.template_bytes"

Behaviour = Literal["variables", "small edit", "rewrite"]
BEHAVIOURS: tuple[Behaviour, ...] = ("variables", "small edit", "rewrite")
Values = dict[str, str | int]
# An edit of the rendered body: `old` (occurs exactly once in it) becomes `new`.
Edit = tuple[str, str]


@dataclass(frozen=True, kw_only=True)
class TemplateSpec:
    id: int
    name: str
    system_prompt: str
    body: str
    variables: tuple[dict[str, Any], ...]
    sampling: dict[str, Any]
    fills: tuple[Values, ...]
    small_edits: tuple[Edit, ...]
    rewrites: tuple[Edit, ...]


# ---- the templates -------------------------------------------------------------------------

TEMPLATES: tuple[TemplateSpec, ...] = (
    TemplateSpec(
        id=1,
        name="Late delivery",
        system_prompt=(
            "You are the customer-service assistant of ShopCo, an online store for home and "
            "garden goods. You help customers whose parcel has not arrived yet. Standard "
            "delivery takes 3 to 5 business days, express delivery 1 to 2 business days, "
            "counted from the day the order ships, not the day it was placed. If the expected "
            "delivery date has not passed, reassure the customer and explain how to follow "
            "the parcel with the tracking link in the shipping e-mail. If it is more than 3 "
            "business days late, offer to open a carrier investigation; it takes up to 5 "
            "business days, after which we send a replacement or a full refund, whichever the "
            "customer prefers. Never promise a delivery date and never invent tracking "
            "details. Answer in two to four short, friendly sentences."
        ),
        body=(
            "Hello, my order {{order_id}} was shipped with {{carrier}} but it still has not "
            "arrived. The tracking page has not changed for several days. Could you tell me "
            "where my parcel is and when I can expect it?"
        ),
        variables=(
            {"name": "order_id", "label": "Order number", "type": "string", "max_length": 20},
            {
                "name": "carrier",
                "label": "Carrier",
                "type": "choice",
                "choices": ["DHL", "UPS", "DPD", "La Poste", "GLS"],
            },
        ),
        sampling={"max_tokens": 80, "temperature": 0.0},
        fills=(
            {"order_id": "SC-104233", "carrier": "DHL"},
            {"order_id": "SC-88121", "carrier": "La Poste"},
            {"order_id": "SC-2024-55810", "carrier": "GLS"},
        ),
        small_edits=(
            ("several days", "several days, since last Monday"),
            ("Hello,", "Hello, this is my second message about it:"),
        ),
        rewrites=(
            (
                "The tracking page has not changed for several days.",
                "The tracking page says it was handed to a neighbour, but none of my "
                "neighbours has it and nobody rang the bell.",
            ),
            (
                "Could you tell me where my parcel is and when I can expect it?",
                "I need it for a birthday on Saturday, so if it cannot arrive before then "
                "please cancel it and refund me instead.",
            ),
        ),
    ),
    TemplateSpec(
        id=2,
        name="Return and refund",
        system_prompt=(
            "You are the returns assistant of ShopCo, an online store for clothing, shoes and "
            "accessories. Customers contact you to return items and get their money back.\n\n"
            "Return policy:\n"
            "- Items can be returned within 30 days of delivery, unworn and with their "
            "original tags. Shoes must be tried on a clean indoor surface only.\n"
            "- Underwear, swimwear with a removed hygiene strip, pierced jewellery and "
            "personalised items cannot be returned unless they are faulty.\n"
            "- Items bought in the sale can be returned for a refund like any other item; "
            "final-sale items marked 'no returns' can only be exchanged if faulty.\n"
            "- Returns are free with the prepaid label from 'My orders' > 'Return items'. "
            "Customers who use another carrier pay the postage themselves.\n"
            "- The refund goes to the original payment method within 5 to 10 business days "
            "after the warehouse receives and checks the parcel. Gift cards are refunded as "
            "store credit.\n"
            "- Original shipping costs are refunded only when the whole order is returned or "
            "the item is faulty.\n\n"
            "How to answer: confirm whether the item can be returned under the policy, explain "
            "the next step in one or two sentences and mention the expected refund time. If "
            "the customer describes a fault, ask for a photo instead of applying the 30-day "
            "limit. Do not ask for payment details. Keep answers short, warm and concrete."
        ),
        body=(
            "Hi, I would like to return the {{item}} from order {{order_id}}. "
            "The reason: {{reason}}. How do I send it back and when will I get my money?"
        ),
        variables=(
            {"name": "item", "label": "Item", "type": "string", "max_length": 120},
            {"name": "order_id", "label": "Order number", "type": "string", "max_length": 20},
            {
                "name": "reason",
                "label": "Reason",
                "type": "choice",
                "choices": [
                    "it does not fit",
                    "it looks different from the photos",
                    "it arrived faulty",
                    "I changed my mind",
                ],
            },
        ),
        sampling={"max_tokens": 100, "temperature": 0.0},
        fills=(
            {
                "item": "blue linen shirt (size M)",
                "order_id": "SC-55102",
                "reason": "it does not fit",
            },
            {
                "item": "leather ankle boots, 39",
                "order_id": "SC-60977",
                "reason": "it looks different from the photos",
            },
            {"item": "Zoë wool scarf", "order_id": "SC-71230", "reason": "I changed my mind"},
        ),
        small_edits=(
            ("Hi,", "Hi there,"),
            ("get my money?", "get my money? Thank you!"),
        ),
        rewrites=(
            (
                "How do I send it back and when will I get my money?",
                "I already printed a label from another carrier and sent it yesterday; will I "
                "still get a full refund, or do I have to pay for the postage?",
            ),
            (
                "Hi, I would like to return",
                "Good morning! My daughter got this as a present and wants to exchange, or "
                "if that is not possible return,",
            ),
        ),
    ),
    TemplateSpec(
        id=3,
        name="Damaged item",
        system_prompt=(
            "You are the support assistant of ShopCo. This conversation is about an item that "
            "arrived damaged or broken. Apologise once, briefly, and then solve the problem.\n\n"
            "What we offer: a free replacement shipped within 2 business days, or a full "
            "refund including shipping, whichever the customer prefers. The customer does not "
            "need to send the damaged item back unless we ask for it; for furniture and "
            "large appliances a courier collects it free of charge. To process the claim we "
            "need one or two photos of the damage and of the outer box, uploaded under "
            "'My orders' > 'Report a problem'. Claims must be reported within 14 days of "
            "delivery; later reports go to the warranty team. Glass and ceramic items are "
            "always replaced, never repaired.\n\n"
            "Never blame the customer or the carrier, never ask for the payment card, and "
            "answer in at most four sentences."
        ),
        body=(
            "My {{item}} arrived broken today. The box was dented on one corner and the item "
            "inside is cracked. I would prefer a {{remedy}}. What do you need from me?"
        ),
        variables=(
            {"name": "item", "label": "Item", "type": "string", "max_length": 120},
            {
                "name": "remedy",
                "label": "What you want",
                "type": "choice",
                "choices": ["replacement", "refund"],
            },
        ),
        sampling={"max_tokens": 80, "temperature": 0.0},
        fills=(
            {"item": "ceramic table lamp", "remedy": "replacement"},
            {"item": "glass coffee table (order SC-30021)", "remedy": "refund"},
            {"item": "set of 6 wine glasses", "remedy": "replacement"},
        ),
        small_edits=(
            ("arrived broken today.", "arrived broken today, sadly."),
            ("What do you need from me?", "What do you need from me? 🙏"),
        ),
        rewrites=(
            (
                "The box was dented on one corner and the item inside is cracked.",
                "The box looked fine, so I think it was packed badly: there was no padding at "
                "all and the base has a long crack.",
            ),
            (
                "What do you need from me?",
                "I already threw the box away, is that a problem for the claim?",
            ),
        ),
    ),
    TemplateSpec(
        id=4,
        name="Double charge",
        system_prompt=(
            "You are the billing assistant of ShopCo, an online store. You help customers who "
            "believe they were charged incorrectly. Be precise and calm; money worries make "
            "people anxious.\n\n"
            "Facts you can rely on:\n"
            "1. When an order is placed, the bank shows a pending authorisation. If the "
            "payment is retried (for example after a 3-D Secure timeout), a second pending "
            "authorisation can appear. Only one of them is ever captured; the other one "
            "disappears within 3 to 7 business days depending on the bank. We cannot release "
            "it sooner.\n"
            "2. A real double capture shows two completed (not pending) transactions with the "
            "same amount. In that case we refund the duplicate within 2 business days, and "
            "the customer sees it after 3 to 5 more business days.\n"
            "3. Orders split into several parcels are charged per parcel, so several smaller "
            "amounts that add up to the order total are expected.\n"
            "4. PayPal and Klarna payments are managed by those providers; point the customer "
            "to the provider's activity page for pending items.\n"
            "5. Prices are charged in euros. Card issuers may add a currency-conversion fee "
            "that ShopCo does not receive and cannot refund.\n\n"
            "How to answer: first explain which of the cases above most likely applies, based "
            "only on what the customer wrote. Ask for the invoice number if it is missing. "
            "Never ask for full card numbers, CVV codes, online-banking passwords or "
            "screenshots that show them; the last four digits of the card are enough. If the "
            "customer mentions a chargeback, tell them politely that it will pause the refund "
            "while the bank investigates. Answer in three to five short sentences, no lists."
        ),
        body=(
            "Hello, I was charged {{amount}} euros twice for invoice {{invoice}}. "
            "I only placed the order once. Please refund the second payment."
        ),
        variables=(
            {"name": "amount", "label": "Amount (EUR)", "type": "integer"},
            {"name": "invoice", "label": "Invoice number", "type": "string", "max_length": 30},
        ),
        sampling={"max_tokens": 120, "temperature": 0.0},
        fills=(
            {"amount": 59, "invoice": "INV-2026-004812"},
            {"amount": 1249, "invoice": "INV-2026-011305"},
            {"amount": 18, "invoice": "INV-2025-098877"},
        ),
        small_edits=(
            ("twice", "twice (both show as completed)"),
            ("Hello,", "Hello, I paid by Visa ending 4421 and"),
        ),
        rewrites=(
            (
                "I only placed the order once.",
                "My bank says both payments are completed, not pending, and my account is "
                "now overdrawn because of it.",
            ),
            (
                "Please refund the second payment.",
                "If this is not fixed by Friday I will have to open a chargeback with my bank.",
            ),
        ),
    ),
    TemplateSpec(
        id=5,
        name="Account access",
        system_prompt=(
            "You are the account-security assistant of ShopCo. Customers write to you when "
            "they cannot sign in, suspect that someone else used their account, or want to "
            "change the e-mail address or password of their account. Your first duty is to "
            "protect the account; your second is to get the customer back in quickly.\n\n"
            "Sign-in problems:\n"
            "- Wrong password: the customer can reset it with 'Forgot password' on the "
            "sign-in page. The reset link is valid for 30 minutes and can be used once. If "
            "the e-mail does not arrive within 10 minutes, ask them to check the spam folder "
            "and whether they used another address for the account (for example a work "
            "address).\n"
            "- Locked account: after 5 failed attempts the account is locked for 15 minutes. "
            "Waiting is the only fix; support cannot unlock it sooner.\n"
            "- Two-step verification: if the customer lost the phone with the authenticator "
            "app, they can use one of the 10 backup codes shown when they enabled it. Without "
            "backup codes, the identity team verifies them by e-mail, which takes 1 to 2 "
            "business days.\n\n"
            "Suspected misuse:\n"
            "- Ask the customer to reset the password immediately and to sign out of all "
            "devices under 'Account' > 'Security'.\n"
            "- Orders they did not place can be cancelled while they are still 'Processing'. "
            "For shipped orders, the fraud team investigates and the customer is never "
            "charged for them.\n"
            "- Saved cards are removed automatically after a password reset triggered by a "
            "misuse report.\n\n"
            "Changing the e-mail address: only in 'Account' > 'Profile', after confirming the "
            "current password; a confirmation link goes to both the old and the new address. "
            "You cannot change it on the customer's behalf.\n\n"
            "Rules: never ask for the password, backup codes or verification codes, never "
            "send links other than shopco.example pages, never confirm whether an e-mail "
            "address has an account (say 'if an account exists for that address'), and never "
            "reveal order details before the customer is signed in. Answer in two to five "
            "short sentences with concrete steps."
        ),
        body=(
            "I cannot sign in to my account with {{email}}. The reset e-mail never arrives "
            "and I have already checked my spam folder."
        ),
        variables=(
            {"name": "email", "label": "E-mail address", "type": "string", "max_length": 254},
        ),
        sampling={"max_tokens": 100, "temperature": 0.0},
        fills=(
            {"email": "maria.lopez@example.com"},
            {"email": "j.müller@beispiel.de"},
            {"email": "chen.wei.1987@example.org"},
        ),
        small_edits=(
            ("never arrives", "never arrives, I tried three times today,"),
            ("I cannot sign in", "Hi, I cannot sign in"),
        ),
        rewrites=(
            (
                "The reset e-mail never arrives and I have already checked my spam folder.",
                "I also got an e-mail saying my password was changed, which I did not do, "
                "and there is an order I do not recognise.",
            ),
            (
                "I cannot sign in to my account",
                "Since I lost my phone with the authenticator app I am locked out of my account",
            ),
        ),
    ),
)


# ---- frames --------------------------------------------------------------------------------


def wire_json(frame: dict[str, Any]) -> str:
    """`JSON.stringify` of the frame: no spaces, non-ASCII as UTF-8."""
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":"))


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


@dataclass(frozen=True, kw_only=True)
class Published:
    """What the server stores for a version and the browser preloads."""

    spec: TemplateSpec
    variables: list[Variable]
    sampling: Sampling
    sha256: str
    version: int = 1


def publish(spec: TemplateSpec) -> Published:
    if not 600 <= len(spec.system_prompt) <= 2500:
        raise SystemExit(
            f"template {spec.name!r}: system prompt has {len(spec.system_prompt)} characters"
        )
    variables = parse_variables(list(spec.variables))
    sampling = parse_sampling(spec.sampling)
    digest = sha256_hex(
        canonical_text(
            system_prompt=spec.system_prompt,
            body=spec.body,
            variables=variables,
            sampling=sampling,
        )
    )
    return Published(spec=spec, variables=variables, sampling=sampling, sha256=digest)


def render(published: Published, values: Values) -> str:
    return render_body(published.spec.body, values, declared={v.name for v in published.variables})


def apply_edit(text: str, edit: Edit) -> str:
    old, new = edit
    if text.count(old) != 1:
        raise SystemExit(f"edit {old!r} must occur exactly once in {text!r}")
    return text.replace(old, new)


def templated_frame(published: Published, values: Values, edited: str) -> dict[str, Any]:
    """`buildTemplatedSend` + `templatedSendFrame` (frontend/src/templates.ts, protocol.ts)."""
    frame: dict[str, Any] = {
        "type": "chat.send",
        "id": str(uuid.uuid4()),
        "conversation_id": None,
        "template": {
            "id": published.spec.id,
            "version": published.version,
            "sha256": published.sha256,
        },
        "variables": dict(values),
    }
    base = render(published, values)
    if edited != base:
        patch = make_patch(base=base, edited=edited)
        if len(patch) > MAX_PATCH_CHARS:
            frame["text"] = edited  # what the browser falls back to
        else:
            frame["patch"] = patch
            frame["result_sha256"] = text_sha256_hex(edited)
    return frame


def with_full_text(frame: dict[str, Any], text: str) -> dict[str, Any]:
    """`withFullText` (frontend/src/protocol.ts): the same frame with `text`, no patch."""
    rest = {k: v for k, v in frame.items() if k not in {"patch", "result_sha256", "text"}}
    return {**rest, "text": text}


def resolve_like_server(published: Published, wire: str) -> str:
    """The server's checks (`templated_message_resolve`) without the database; fail loudly."""
    frame = client_frame_adapter.validate_json(wire)
    if not isinstance(frame, SendFrame) or frame.template is None:
        raise SystemExit(f"not a templated chat.send: {wire}")
    if (frame.template.id, frame.template.version, frame.template.sha256) != (
        published.spec.id,
        published.version,
        published.sha256,
    ):
        raise SystemExit(f"template reference does not match the published version: {wire}")
    if frame.text is not None:
        return frame.text
    values = clean_values(published.variables, frame.variables)
    final = render(published, values)
    if frame.patch is not None:
        final = apply_patch(base=final, patch=frame.patch)
        if text_sha256_hex(final) != frame.result_sha256:
            raise SystemExit(f"result_sha256 mismatch after applying the patch: {wire}")
    return final


# ---- measurement ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Case:
    template: str
    behaviour: Behaviour
    fill: int
    user_text_chars: int
    patch_chars: int  # 0 without a patch
    templated_frame_bytes: int
    plain_frame_bytes: int
    text_frame_bytes: int  # the templated frame with the full `text` instead of a patch
    system_plus_user_bytes: int
    model_prompt_bytes: int
    model_prompt_tokens: int
    templated_frame: str

    @property
    def ratio_plain(self) -> float:
        return self.templated_frame_bytes / self.plain_frame_bytes

    @property
    def ratio_system_user(self) -> float:
        return self.templated_frame_bytes / self.system_plus_user_bytes

    @property
    def ratio_model_prompt(self) -> float:
        return self.templated_frame_bytes / self.model_prompt_bytes

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data |= {
            "ratio_plain": self.ratio_plain,
            "ratio_system_user": self.ratio_system_user,
            "ratio_model_prompt": self.ratio_model_prompt,
        }
        return data


def measure(published: Published, builder: PromptBuilder) -> list[Case]:
    spec = published.spec
    cases: list[Case] = []
    for index, raw_values in enumerate(spec.fills, start=1):
        values = clean_values(published.variables, raw_values)
        base = render(published, values)
        variants: list[tuple[Behaviour, str]] = [("variables", base)]
        variants += [("small edit", apply_edit(base, edit)) for edit in spec.small_edits]
        variants += [("rewrite", apply_edit(base, edit)) for edit in spec.rewrites]
        for behaviour, edited in variants:
            frame = templated_frame(published, values, edited)
            wire = wire_json(frame)
            resolved = resolve_like_server(published, wire)
            if resolved != edited:
                raise SystemExit(
                    f"{spec.name} ({behaviour}): the frame resolves to {resolved!r}, not {edited!r}"
                )
            if behaviour != "variables" and "patch" not in frame:
                raise SystemExit(f"{spec.name} ({behaviour}): expected a patch frame: {wire}")
            model_prompt = builder.build(
                system=spec.system_prompt,
                messages=[ChatTurn(role="user", content=edited)],
                max_tokens=int(published.sampling.max_tokens or 1),
                trim=False,
            )
            cases.append(
                Case(
                    template=spec.name,
                    behaviour=behaviour,
                    fill=index,
                    user_text_chars=len(edited),
                    patch_chars=len(frame.get("patch", "")),
                    templated_frame_bytes=utf8_len(wire),
                    plain_frame_bytes=utf8_len(wire_json(harness.chat_send(edited))),
                    text_frame_bytes=utf8_len(wire_json(with_full_text(frame, edited))),
                    system_plus_user_bytes=utf8_len(spec.system_prompt) + utf8_len(edited),
                    model_prompt_bytes=utf8_len(model_prompt.text),
                    model_prompt_tokens=len(model_prompt.token_ids),
                    templated_frame=wire,
                )
            )
    return cases


# ---- report --------------------------------------------------------------------------------


def summary_row(label: str, cases: Sequence[Case]) -> str:
    def med(attr: str) -> float:
        return harness.median([float(getattr(c, attr)) for c in cases])

    patches = [float(c.patch_chars) for c in cases if c.patch_chars]
    cells = [
        label,
        str(len(cases)),
        f"{med('templated_frame_bytes'):.0f}",
        f"{harness.median(patches):.0f}" if patches else "-",
        f"{med('plain_frame_bytes'):.0f}",
        f"{med('text_frame_bytes'):.0f}",
        f"{med('system_plus_user_bytes'):.0f}",
        f"{med('model_prompt_bytes'):.0f}",
        f"{med('model_prompt_tokens'):.0f}",
        f"{med('ratio_plain'):.2f}",
        f"{med('ratio_system_user'):.3f}",
        f"{med('ratio_model_prompt'):.3f}",
    ]
    return "| " + " | ".join(cells) + " |"


TABLE_HEADER = (
    "| {what} | frames | templated frame (B) | patch (chars) | plain `chat.send` (B) | "
    "template + `text` (B) | system + user text (B) | model prompt (B) | model prompt (tokens) "
    "| templated / plain | templated / system+user | templated / model prompt |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def build_tables(cases: Sequence[Case]) -> tuple[str, str]:
    by_behaviour = [TABLE_HEADER.format(what="behaviour")]
    for behaviour in BEHAVIOURS:
        by_behaviour.append(summary_row(behaviour, [c for c in cases if c.behaviour == behaviour]))
    by_behaviour.append(summary_row("**all**", cases))
    by_template = [TABLE_HEADER.format(what="template (system prompt chars)")]
    for spec in TEMPLATES:
        label = f"{spec.name} ({len(spec.system_prompt)})"
        by_template.append(summary_row(label, [c for c in cases if c.template == spec.name]))
    return "\n".join(by_behaviour), "\n".join(by_template)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help="model folder whose tokenizer and chat template render the model prompt "
        "(default $CHAT_DATA_DIR or <repo>/data, then models/smollm2-135m-instruct)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    data_dir = Path(os.environ.get("CHAT_DATA_DIR") or harness.REPO_ROOT / "data")
    model_dir: Path = (args.model_dir or data_dir / "models" / SMOLLM2_DIR_NAME).resolve()
    # the context only bounds trimming, which a one-message conversation never needs
    builder = tokenizer_prompt_builder(model_dir, context_tokens=1_000_000)
    cases = [case for spec in TEMPLATES for case in measure(publish(spec), builder)]
    by_behaviour, by_template = build_tables(cases)
    stamp = harness.timestamp()
    example = next(c for c in cases if c.behaviour == "small edit")
    header = (
        f"template_bytes {stamp}: {len(cases)} templated `chat.send` frames "
        f"({len(TEMPLATES)} templates x {len(TEMPLATES[0].fills)} value sets x "
        f"(1 exact + {len(TEMPLATES[0].small_edits)} small edits + "
        f"{len(TEMPLATES[0].rewrites)} rewrites)), all resolved back exactly (patch + hash)\n\n"
        f"- CPU: {harness.cpu_name()}, Python {platform.python_version()}\n"
        f"- model prompt: the chat template and tokenizer of {model_dir}\n"
        f"- command: `{harness.command_line(module=MODULE)}`\n"
        "- sizes are UTF-8 bytes of the JSON frame (`JSON.stringify` form) or of the text; "
        "every cell is a median over the frames of its row, ratios are medians of per-frame "
        "ratios"
    )
    markdown = "\n\n".join(
        [
            header,
            "By behaviour:",
            by_behaviour,
            "By template:",
            by_template,
            f"Example frame ({example.template}, small edit, {example.templated_frame_bytes} B):",
            f"```json\n{example.templated_frame}\n```",
        ]
    )
    print(markdown)
    report = {
        "timestamp": stamp,
        "command": harness.command_line(module=MODULE),
        "model_dir": str(model_dir),
        "templates": [
            {
                "id": spec.id,
                "name": spec.name,
                "system_prompt_chars": len(spec.system_prompt),
                "body": spec.body,
                "variables": list(spec.variables),
            }
            for spec in TEMPLATES
        ],
        "cases": [case.to_json() for case in cases],
    }
    harness.write_results(
        name="template_bytes", stamp=stamp, markdown=markdown, report=report, ensure_ascii=False
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
