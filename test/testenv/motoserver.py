# moto_server with speed-ups for the testbed's bursts of hundreds of
# messages, and one timing brought closer to AWS's. 1, 2 and 4 replace a
# pure computation by an equivalent cheaper one; 3 changes when a waiting
# long poll sees a message, not what it sees. Arguments are moto_server's.
# Measured with moto 5.2.1 on the development machine (see docs/testing.md).
#
# 1. EventBridge: for every event it delivers to a target, moto parses the
#    eight JSONPath expressions of its default input template with
#    jsonpath_ng (~110 ms per event): rule delivery ran at ~9 events/s.
#    jsonpath_ng's parse depends only on its string, so it is cached.
# 2. SQS ReceiveMessage: for every message it returns, moto checks the
#    retention period through get_queue_attributes, which computes every
#    attribute, including counts over all messages of the queue; and each
#    visibility check converts datetimes. With 1,000 messages on a queue,
#    four receivers got ~10 messages/s. The retention check now reads the
#    one attribute, and unix_time keeps its epoch instead of recomputing it.
# 3. SQS long polls: moto wakes a waiting ReceiveMessage when a message is
#    sent, else once a second; a message whose visibility timeout ends (a
#    hand-back with a delay) is seen at the next wake of each poller. AWS
#    answers a waiting long poll as soon as a message is visible. With two
#    consumers on one queue, the one that handed a message back re-polls in
#    phase with its return and wins it nearly every time (test/e2e
#    TestTwoClustersOneQueue: a foreign message received by the wrong
#    consumer 10 times in a row, its node cordoned 10.1 s after the notice).
#    A waiting poller now looks again every 100 ms on average, each wait
#    drawn from 50-150 ms: with a fixed 100 ms the poller that received a
#    message and polled again at once stayed in phase with that message's
#    hand-back, and after 1 s (ten waits plus their few ms of work) woke
#    just after it became visible, first of all pollers, every time
#    (TestTwoClustersOneQueue: one message received by the wrong consumer
#    7 times in a row at 1.006 s intervals, worst cordons 7-9 s in most
#    runs). Random waits spread the phases as AWS's lottery among waiting
#    polls does.
# 4. SQS ChangeMessageVisibility and DeleteMessage: moto finds the message
#    of a receipt handle by asking every message of the queue whether it
#    ever had that handle (building a list of its handles each time). A
#    5,000-notice burst's extension rounds (5,000 entries every 10 s) cost
#    25 million such questions each, and moto took 147 s of CPU in a burst
#    (docs/benchmarks.md, session 22). Each handle a receive hands out is
#    now remembered with its message; a lookup still makes sure the message
#    is in the queue, and a handle not found that way goes to moto's own
#    scan, so every answer is moto's.
import functools
import random
import time

import jsonpath_ng.ext

jsonpath_ng.ext.parse = functools.lru_cache(maxsize=256)(jsonpath_ng.ext.parse)

import moto.core.utils as _utils  # noqa: E402  (after the patch, on purpose)
import moto.sqs.models as _sqs  # noqa: E402

_EPOCH = _utils.utcfromtimestamp(0)


def _unix_time(dt=None):
    if dt is None:
        return time.time()
    delta = dt - _EPOCH
    return (delta.days * 86400) + (delta.seconds + (delta.microseconds / 1e6))


_utils.unix_time = _unix_time
_sqs.unix_time = _unix_time


def _valid_for_retention(self, queue_name, message):
    queue = self.get_queue(queue_name)
    retain_until = int(queue.message_retention_period) + message.sent_timestamp / 1000
    return retain_until > _unix_time()


_sqs.SQSBackend.is_message_valid_based_on_retention_period = _valid_for_retention

_LONG_POLL_RECHECK = 0.1


def _wait_for_messages(self, timeout):
    with self._messages_lock:
        self._messages_lock.wait_for(lambda: self.messages, timeout=min(timeout, random.uniform(0.5 * _LONG_POLL_RECHECK, 1.5 * _LONG_POLL_RECHECK)))


_sqs.Queue.wait_for_messages = _wait_for_messages

# 4. Receipt handles found without scanning the queue.
_BY_HANDLE = {}  # every receipt handle handed out -> its message
_orig_mark_received = _sqs.Message.mark_received


def _mark_received(self, *args, **kwargs):
    _orig_mark_received(self, *args, **kwargs)
    _BY_HANDLE[self.receipt_handle] = self


_sqs.Message.mark_received = _mark_received


def _members(queue):
    """The ids of the queue's messages, rebuilt when its list changed."""
    key = (id(queue._messages), len(queue._messages))
    cached = queue.__dict__.get("_lb_members")
    if cached is None or cached[0] != key:
        cached = (key, {id(m) for m in queue._messages})
        queue.__dict__["_lb_members"] = cached
    return cached[1]


def _find(queue, receipt_handle):
    m = _BY_HANDLE.get(receipt_handle)
    if m is not None and id(m) in _members(queue):
        return m
    return None


_orig_change_visibility = _sqs.SQSBackend.change_message_visibility


def _change_message_visibility(self, queue_name, receipt_handle, visibility_timeout):
    queue = self.get_queue(queue_name)
    message = _find(queue, receipt_handle)
    given = _utils.unix_time_millis() + int(visibility_timeout) * 1000
    if message is None or given - message.sent_timestamp > 43200 * 1000:
        # moto's own answer: not found, or beyond SQS's 12 hours
        return _orig_change_visibility(self, queue_name, receipt_handle, visibility_timeout)
    message.change_visibility(visibility_timeout)
    if message.visible and message in queue.pending_messages:
        queue.pending_messages.remove(message)


_sqs.SQSBackend.change_message_visibility = _change_message_visibility

_orig_delete = _sqs.Queue.delete_message


def _delete_message(self, receipt_handle):
    if receipt_handle in self.deleted_messages:
        return
    message = _find(self, receipt_handle)
    if message is None:
        return _orig_delete(self, receipt_handle)
    members = _members(self)
    self.pending_messages.discard(message)
    self.deleted_messages.update(message.all_receipt_handles)
    self._messages = [m for m in self._messages if m is not message]
    members.discard(id(message))
    self.__dict__["_lb_members"] = ((id(self._messages), len(self._messages)), members)
    for h in message.all_receipt_handles:
        _BY_HANDLE.pop(h, None)


_sqs.Queue.delete_message = _delete_message

from moto.server import main  # noqa: E402

main()
