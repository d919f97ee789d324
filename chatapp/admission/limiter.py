"""Admission control: whether a generation request may start now, or why not and when to retry.

A request is admitted only if a worker exists, the user is within their rate window and their
concurrency limit (and so is their group, if they belong to one: a website's guests from one
network address share its limits), and the service holds fewer outstanding requests than the
workers' total capacity; otherwise it is refused at once instead of waiting in an unbounded
queue. An admitted request holds a lease (globally, for its user and its group) until
released; its owner renews it every heartbeat, so a lease that is never released (a crashed web
process) expires `lease_s` after the owner's last renewal. A refused request consumes nothing.

The limits live in Redis (every web process shares them; one Lua script checks and takes
atomically); the embedded default uses its process's own Redis.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Literal

import redis.asyncio as redis

from chatapp.metrics import recording as metrics
from inference.wire.redis_client import redis_client

RefusalReason = Literal[
    "busy",
    "user_concurrency",
    "rate_limited",
    "group_concurrency",
    "group_rate_limited",
    "no_worker",
]
# A user key may name the group its user counts in: `USER@GROUP` (grouped_user_key).
_GROUP_SEPARATOR = "@"


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupLimits:
    """What all users of one group may do together (their sum), on top of each one's own."""

    max_concurrent: int
    rate: int
    rate_window_s: float

    def __post_init__(self) -> None:
        if self.max_concurrent < 1 or self.rate < 1 or self.rate_window_s <= 0:
            raise ValueError("a group's limits must be at least 1 and its window positive")


def grouped_user_key(user_key: str, group: str) -> str:
    """`user_key` counted also in `group` (whose limits come with each acquire)."""
    if _GROUP_SEPARATOR in user_key or _GROUP_SEPARATOR in group:
        raise ValueError(f"user keys and groups may not contain {_GROUP_SEPARATOR!r}")
    return f"{user_key}{_GROUP_SEPARATOR}{group}"


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionLimits:
    user_max_concurrent: int  # answers one user may have generating at once, all processes
    user_rate: int  # requests a user may start per window
    user_rate_window_s: float
    lease_s: float  # a slot not released within this is freed anyway (crashed web process)
    busy_retry_after_s: float  # retry-after when all workers are full (or there is none)
    group: GroupLimits | None = None  # for a grouped user key; without, its group is not bounded

    def __post_init__(self) -> None:
        if self.user_max_concurrent < 1 or self.user_rate < 1:
            raise ValueError("user_max_concurrent and user_rate must be at least 1")
        if self.user_rate_window_s <= 0 or self.lease_s <= 0 or self.busy_retry_after_s < 0:
            raise ValueError("windows and leases must be positive, retry-after not negative")


@dataclass(frozen=True, slots=True)
class Admitted:
    request_id: str


@dataclass(frozen=True, slots=True)
class Lease:
    request_id: str
    user_key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    reason: RefusalReason
    retry_after_s: float  # whole seconds, at least 1
    message: str  # for the end user


def _whole_seconds(seconds: float) -> float:
    # Rounded up so a client that waits this long is never early; the 1 ms slack absorbs float
    # noise (1.0000001 s must not become 2 s).
    return float(max(1, math.ceil(seconds - 0.001)))


def _in(seconds: float) -> str:
    n = int(seconds)
    return f"{n} second" if n == 1 else f"{n} seconds"


def _refused(reason: RefusalReason, retry_after_s: float, *, limits: AdmissionLimits) -> Refused:
    retry = _whole_seconds(retry_after_s)
    if reason == "no_worker":
        message = f"The assistant is not available right now. Please try again in {_in(retry)}."
    elif reason == "rate_limited":
        message = f"You are sending messages too quickly. Please try again in {_in(retry)}."
    elif reason == "group_rate_limited":
        message = (
            f"Too many questions are coming from your network. Please try again in {_in(retry)}."
        )
    elif reason == "group_concurrency":
        message = (
            f"Too many answers are in progress for your network. Please try again in {_in(retry)}."
        )
    elif reason == "user_concurrency":
        if limits.user_max_concurrent == 1:
            message = "Please wait for the current answer to finish before asking again."
        else:
            message = (
                f"You already have {limits.user_max_concurrent} answers in progress. "
                "Please wait for one to finish before asking again."
            )
    else:
        message = f"The assistant is busy right now. Please try again in {_in(retry)}."
    metrics.admission_refused(reason=reason)  # every refusal, whoever asked (socket, API)
    return Refused(reason=reason, retry_after_s=retry, message=message)


# KEYS: global leases, user leases, user starts[, group leases, group starts] (ZSETs; leases
#       scored by expiry, starts by time).
# ARGV: global member, request_id, now, capacity, user_max_concurrent, user_rate, window_s,
#       lease_s, busy_retry_after_s[, group_max_concurrent, group_rate, group_window_s].
# The group's ZSETs hold the global member (request ids come from clients: two users of a
# group may send the same one).
# Returns {'admitted'} or {reason, retry_after_seconds as a string (Lua numbers would be
# truncated to integers on the way out)}.
_ACQUIRE = """
local member, request_id = ARGV[1], ARGV[2]
local now, capacity = tonumber(ARGV[3]), tonumber(ARGV[4])
local max_concurrent, rate = tonumber(ARGV[5]), tonumber(ARGV[6])
local window, lease, busy_retry = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local grouped = #KEYS == 5

local function keep(key, seconds)
  -- never shorten a key's life: another process may have leased later
  local ms = math.ceil(seconds * 1000) + 1000
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - window)
local group_max, group_rate, group_window
if grouped then
  group_max, group_rate = tonumber(ARGV[10]), tonumber(ARGV[11])
  group_window = tonumber(ARGV[12])
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - group_window)
end

local function lease_take()
  redis.call('ZADD', KEYS[1], now + lease, member)
  redis.call('ZADD', KEYS[2], now + lease, request_id)
  keep(KEYS[1], lease)
  keep(KEYS[2], lease)
  if grouped then
    redis.call('ZADD', KEYS[4], now + lease, member)
    keep(KEYS[4], lease)
  end
end

-- seconds until the oldest start that keeps a window full leaves it
local function rate_wait(key, limit, seconds)
  local started = redis.call('ZCARD', key)
  if started < limit then return nil end
  local leaving = redis.call('ZRANGE', key, started - limit, started - limit, 'WITHSCORES')
  return tostring(tonumber(leaving[2]) + seconds - now)
end

if redis.call('ZSCORE', KEYS[2], request_id) then
  lease_take()
  return {'admitted'}
end

local wait = rate_wait(KEYS[3], rate, window)
if wait then return {'rate_limited', wait} end
if grouped then
  wait = rate_wait(KEYS[5], group_rate, group_window)
  if wait then return {'group_rate_limited', wait} end
end
if redis.call('ZCARD', KEYS[2]) >= max_concurrent then
  return {'user_concurrency', tostring(busy_retry)}
end
if grouped and redis.call('ZCARD', KEYS[4]) >= group_max then
  return {'group_concurrency', tostring(busy_retry)}
end
if redis.call('ZCARD', KEYS[1]) >= capacity then
  return {'busy', tostring(busy_retry)}
end

lease_take()
redis.call('ZADD', KEYS[3], now, request_id)
keep(KEYS[3], window)
if grouped then
  redis.call('ZADD', KEYS[5], now, member)
  keep(KEYS[5], group_window)
end
return {'admitted'}
"""

# KEYS: keys to keep. ARGV: ms. Each key lives at least ms from now (never shortened).
_KEEP = """
for _, key in ipairs(KEYS) do
  if redis.call('PTTL', key) < tonumber(ARGV[1]) then redis.call('PEXPIRE', key, ARGV[1]) end
end
"""


class Admission:
    """Admission shared by all web processes through Redis.

    `now` comes from this process's clock (time.time); web hosts are expected to be
    NTP-synchronised, and a skew only shifts leases and windows by that much.
    """

    def __init__(
        self, *, redis_url: str, limits: AdmissionLimits, prefix: str = "chat:admission"
    ) -> None:
        self._limits = limits
        self._prefix = prefix
        # Retried commands are safe: a repeated acquire of the same request finds its own lease
        # and is admitted without counting twice; release is idempotent.
        self._redis: redis.Redis = redis_client(redis_url)
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._keep = self._redis.register_script(_KEEP)

    def _leases_key(self) -> str:
        return f"{self._prefix}:leases"

    def _user_keys(self, user_key: str) -> tuple[str, str]:
        user = user_key.partition(_GROUP_SEPARATOR)[0]  # a user's own limits, whatever group
        return f"{self._prefix}:user:{user}:leases", f"{self._prefix}:user:{user}:starts"

    def _group_keys(self, user_key: str) -> tuple[str, str] | None:
        _, grouped, group = user_key.partition(_GROUP_SEPARATOR)
        if not grouped:
            return None
        return f"{self._prefix}:group:{group}:leases", f"{self._prefix}:group:{group}:starts"

    @staticmethod
    def _member(user_key: str, request_id: str) -> str:
        # Request ids come from clients: scope them by user so one user cannot share another's
        # lease; the length prefix keeps the pair unambiguous whatever characters they hold.
        return f"{len(user_key)}:{user_key}:{request_id}"

    async def acquire(
        self,
        *,
        request_id: str,
        user_key: str,
        capacity: int,
        limits: AdmissionLimits | None = None,
    ) -> Admitted | Refused:
        """Admit or refuse. Acquiring again a request_id that the same user still holds admits
        it without counting it twice and renews its lease. `limits` replaces the limiter's own
        for this user (API keys carry their own rate and concurrency); the global capacity is
        shared either way. A grouped user key is bounded by `limits.group` too."""
        limits = limits or self._limits
        if capacity <= 0:
            return _refused("no_worker", limits.busy_retry_after_s, limits=limits)
        user_leases, user_starts = self._user_keys(user_key)
        keys = [self._leases_key(), user_leases, user_starts]
        group_args: list[Any] = []
        group_keys = self._group_keys(user_key)
        if group_keys is not None and limits.group is not None:
            keys.extend(group_keys)
            group = limits.group
            group_args = [group.max_concurrent, group.rate, repr(group.rate_window_s)]
        result: list[Any] = await self._acquire(
            keys=keys,
            args=[
                self._member(user_key, request_id),
                request_id,
                repr(time.time()),
                capacity,
                limits.user_max_concurrent,
                limits.user_rate,
                repr(limits.user_rate_window_s),
                repr(limits.lease_s),
                repr(limits.busy_retry_after_s),
                *group_args,
            ],
        )
        if result[0] == "admitted":
            return Admitted(request_id)
        return _refused(result[0], float(result[1]), limits=limits)

    async def draft_take(self, *, user_key: str, every_s: float) -> bool:
        """A typing prefill for this user may go: at most one per `every_s` for each user,
        over all sockets and web processes (0: always)."""
        if every_s <= 0:
            return True
        # One key a user, there while the interval lasts: the first draft sets it, the rest of
        # the interval's drafts (any socket, any web process) find it set.
        key = f"{self._prefix}:user:{user_key}:draft"
        return bool(await self._redis.set(key, 1, px=max(1, round(every_s * 1000)), nx=True))

    async def release(self, *, request_id: str, user_key: str, refund: bool = False) -> None:
        """Free the request's leases; idempotent. `refund`: the request was refused after it
        was admitted (nothing started), so it does not count against the user's rate either."""
        user_leases, user_starts = self._user_keys(user_key)
        member = self._member(user_key, request_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.zrem(self._leases_key(), member)
            pipe.zrem(user_leases, request_id)
            if refund:
                pipe.zrem(user_starts, request_id)
            group_keys = self._group_keys(user_key)
            if group_keys is not None:
                pipe.zrem(group_keys[0], member)
                if refund:
                    pipe.zrem(group_keys[1], member)
            await pipe.execute()

    async def renew(self, *, leases: list[Lease]) -> None:
        """Extend these leases by `lease_s` from now (their owner is alive); a lease already
        released or expired stays so."""
        if not leases:
            return
        expiry = time.time() + self._limits.lease_s
        keys = {self._leases_key()}
        async with self._redis.pipeline(transaction=False) as pipe:
            for lease in leases:
                member = self._member(lease.user_key, lease.request_id)
                user_leases, _ = self._user_keys(lease.user_key)
                group_keys = self._group_keys(lease.user_key)
                # XX: only leases that still exist; GT: never shorten one
                pipe.zadd(self._leases_key(), {member: expiry}, xx=True, gt=True)
                pipe.zadd(user_leases, {lease.request_id: expiry}, xx=True, gt=True)
                keys.add(user_leases)
                if group_keys is not None:
                    pipe.zadd(group_keys[0], {member: expiry}, xx=True, gt=True)
                    keys.add(group_keys[0])
            # the keys themselves must outlive the leases they hold (never shortened; a script
            # because PEXPIRE's GT option is Redis 7 and the embedded server is 6.2)
            await self._keep(
                keys=sorted(keys), args=[int(self._limits.lease_s * 1000) + 1000], client=pipe
            )
            await pipe.execute()

    async def outstanding(self) -> int:
        """Requests admitted and not yet released (live leases)."""
        return int(await self._redis.zcount(self._leases_key(), f"({time.time()!r}", "+inf"))

    async def aclose(self) -> None:
        await self._redis.aclose()


def admission_for(*, redis_url: str, limits: AdmissionLimits) -> Admission:
    """A limiter on `redis_url` (empty: this process's embedded Redis). Each call opens its own
    client: build one per process (or event loop) and share it."""
    return Admission(redis_url=redis_url, limits=limits)
