"""A user and a developer reaching the stack through its published port, as the TLS proxy of
docs/operations.md forwards them: `X-Forwarded-Proto: https` (production redirects plain
HTTP), the proxy's address in `X-Forwarded-For`, and the cookies a browser keeps (they are
`Secure`, so they are carried here by hand over the plain loopback hop)."""

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import websockets

ORIGIN = "https://localhost"
PROXY_HEADERS = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "127.0.0.1"}


@dataclass
class Answer:
    text: str = ""
    frames: list[dict[str, Any]] = field(default_factory=list)

    @property
    def done(self) -> dict[str, Any]:
        return next(f for f in self.frames if f["type"] in ("chat.done", "chat.error"))

    @property
    def accepted(self) -> dict[str, Any]:
        return next(f for f in self.frames if f["type"] == "chat.accepted")


@dataclass
class Visitor:
    port: int
    cookies: dict[str, str] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _keep(self, response: httpx.Response) -> None:
        for name, value in response.cookies.items():
            self.cookies[name] = value

    def get(self, path: str) -> httpx.Response:
        response = httpx.get(
            self.base + path, headers=PROXY_HEADERS, cookies=self.cookies, timeout=30
        )
        self._keep(response)
        return response

    def login(self, *, username: str, password: str) -> None:
        self.get("/accounts/login/")
        response = httpx.post(
            f"{self.base}/accounts/login/",
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": self.cookies["csrftoken"],
            },
            headers={**PROXY_HEADERS, "Referer": f"{ORIGIN}/accounts/login/", "Origin": ORIGIN},
            cookies=self.cookies,
            timeout=30,
        )
        if response.status_code != 302:
            raise RuntimeError(f"login failed: {response.status_code} {response.text[:300]}")
        self._keep(response)

    async def ask(
        self, text: str, *, conversation_id: str | None = None, on_first_delta: Any = None
    ) -> Answer:
        """Send `text` on /ws/chat/ as the page does and read frames until the answer ends;
        `on_first_delta` (a coroutine function) runs when the first token arrives."""
        answer = Answer()
        headers = {**PROXY_HEADERS, "Origin": ORIGIN}
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        async with websockets.connect(
            f"ws://127.0.0.1:{self.port}/ws/chat/", additional_headers=headers
        ) as socket:
            frame = {"type": "chat.send", "id": str(uuid.uuid4()), "text": text}
            await socket.send(json.dumps({**frame, "conversation_id": conversation_id}))
            while True:
                reply = json.loads(await asyncio.wait_for(socket.recv(), 300))
                answer.frames.append(reply)
                if reply["type"] == "chat.delta":
                    if not answer.text and on_first_delta is not None:
                        await on_first_delta()
                    answer.text += reply["text"]
                if reply["type"] in ("chat.done", "chat.error"):
                    return answer

    def model_id(self, *, key: str) -> str:
        response = httpx.get(
            f"{self.base}/v1/models",
            headers={**PROXY_HEADERS, "Authorization": f"Bearer {key}"},
            timeout=30,
        )
        response.raise_for_status()
        return str(response.json()["data"][0]["id"])

    def completion(self, *, key: str, text: str) -> dict[str, Any]:
        """A streamed `/v1/chat/completions`, read back as the text and the last chunk."""
        body = {
            "model": self.model_id(key=key),
            "messages": [{"role": "user", "content": text}],
            "max_tokens": 24,
            "temperature": 0,
            "stream": True,
        }
        chunks: list[dict[str, Any]] = []
        with httpx.stream(
            "POST",
            f"{self.base}/v1/chat/completions",
            json=body,
            headers={**PROXY_HEADERS, "Authorization": f"Bearer {key}"},
            timeout=120,
        ) as response:
            if response.status_code != 200:
                raise RuntimeError(f"/v1: {response.status_code} {response.read()[:300]!r}")
            for line in response.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunks.append(json.loads(line.removeprefix("data: ")))
        text_out = "".join(
            c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
        )
        finish = next(c["choices"][0]["finish_reason"] for c in reversed(chunks) if c["choices"])
        return {"text": text_out, "finish_reason": finish, "chunks": len(chunks)}


def grpc_answer(*, port: int, key: str, text: str) -> dict[str, Any]:
    """One `Send` on a gRPC Chat stream through the published port, read to its end."""
    import queue

    import grpc

    from chatapp.grpc_api.generated import chat_pb2, chat_pb2_grpc

    outbox: queue.Queue[chat_pb2.ClientEvent | None] = queue.Queue()
    outbox.put(chat_pb2.ClientEvent(send=chat_pb2.Send(client_id=str(uuid.uuid4()), text=text)))
    answer: dict[str, Any] = {"text": "", "end": None}
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = chat_pb2_grpc.ChatStub(channel)  # type: ignore[no-untyped-call]
        call = stub.Chat(
            iter(outbox.get, None), metadata=[("authorization", f"Bearer {key}")], timeout=120
        )
        for event in call:
            kind = event.WhichOneof("event")
            if kind == "accepted":
                answer["message_id"] = event.accepted.message_id
            elif kind == "delta":
                answer["text"] += event.delta.text
            elif kind in ("done", "error"):
                answer["end"] = getattr(event, kind)
                break
        outbox.put(None)
    return answer
