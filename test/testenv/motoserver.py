# moto_server with one speed-up for the testbed: moto's EventBridge parses
# the same eight JSONPath expressions (its default input template) with
# jsonpath_ng for every event it delivers to a target, ~110 ms per event,
# which caps rule delivery at ~9 events/s. jsonpath_ng's parse is a pure
# function of its string, so caching it changes no behaviour (measured: 9 ->
# ~140 delivered events/s). Arguments are moto_server's.
import functools

import jsonpath_ng.ext

jsonpath_ng.ext.parse = functools.lru_cache(maxsize=256)(jsonpath_ng.ext.parse)

from moto.server import main  # noqa: E402  (after the patch, on purpose)

main()
