# moto_server with speed-ups for the testbed's bursts of hundreds of
# messages, and one timing brought closer to AWS's. 1 and 2 replace a pure
# computation by an equivalent cheaper one; 3 changes when a waiting long
# poll sees a message, not what it sees. Arguments are moto_server's.
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

from moto.server import main  # noqa: E402

main()
