package failover

import (
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/source/sqs"
)

// A shard's data is one line per message: when its visibility ends at the
// latest (Unix milliseconds), a space, its receipt handle. Plain text, so
// that `kubectl get configmap -o yaml` shows what a dead leader held.

// shardData is what one shard is to hold.
type shardData struct {
	text    string
	handles []string // the receipt handles text holds
	leftOut int      // messages that did not fit
}

// split spreads held over the shards by message ID, each shard's lines in
// order (so that the same messages make the same text), and leaves out what
// does not fit in maxShardBytes.
func split(held []sqs.Held) [Shards]shardData {
	var byShard [Shards][]sqs.Held
	for _, h := range held {
		i := shardOf(h.MessageID)
		byShard[i] = append(byShard[i], h)
	}
	var out [Shards]shardData
	for i, hs := range byShard {
		slices.SortFunc(hs, func(a, b sqs.Held) int { return strings.Compare(a.Handle, b.Handle) })
		var b strings.Builder
		for _, h := range hs {
			l := strconv.FormatInt(h.HiddenUntil.UnixMilli(), 10) + " " + h.Handle + "\n"
			if b.Len()+len(l) > maxShardBytes {
				out[i].leftOut++
				continue
			}
			b.WriteString(l)
			out[i].handles = append(out[i].handles, h.Handle)
		}
		out[i].text = b.String()
	}
	return out
}

// shardOf is the shard of a message.
func shardOf(messageID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(messageID))
	return int(h.Sum32() % Shards)
}

// decode reads a shard's lines; the messages' IDs are not recorded. It
// returns the lines it could not read apart.
func decode(text string) (held []sqs.Held, malformed int) {
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		ms, handle, ok := strings.Cut(line, " ")
		at, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil || handle == "" || strings.ContainsAny(handle, " \t") {
			malformed++
			continue
		}
		held = append(held, sqs.Held{Handle: handle, HiddenUntil: time.UnixMilli(at)})
	}
	return held, malformed
}
