package event

import "testing"

func TestNormalizeInstanceID(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain short", "i-1234abcd", "i-1234abcd"},
		{"plain long", "i-0123456789abcdef0", "i-0123456789abcdef0"},
		{"whitespace", " i-0123456789abcdef0\n", "i-0123456789abcdef0"},
		{"arn", "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0", "i-0123456789abcdef0"},
		{"upper case", "i-0123456789ABCDEF0", ""},
		{"wrong length", "i-0123", ""},
		{"empty", "", ""},
		{"not an instance", "vol-0123456789abcdef0", ""},
		{"path injection", "i-0123456789abcdef0/../x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NormalizeInstanceID(tt.in); got != tt.want {
				t.Errorf("NormalizeInstanceID(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestIDStable(t *testing.T) {
	a := ID(SpotInterruption, "i-1234abcd", "terminate", "2024-01-01T00:00:00Z")
	b := ID(SpotInterruption, "i-1234abcd", "terminate", "2024-01-01T00:00:00Z")
	if a != b {
		t.Fatalf("same content gave two IDs: %s, %s", a, b)
	}
	for name, other := range map[string]string{
		"other kind":     ID(RebalanceRecommendation, "i-1234abcd", "terminate", "2024-01-01T00:00:00Z"),
		"other instance": ID(SpotInterruption, "i-1234abce", "terminate", "2024-01-01T00:00:00Z"),
		"other part":     ID(SpotInterruption, "i-1234abcd", "stop", "2024-01-01T00:00:00Z"),
		"parts shifted":  ID(SpotInterruption, "i-1234abcd", "terminate2024-01-01T00:00:00Z"),
	} {
		if other == a {
			t.Errorf("%s: got the same ID %s", name, a)
		}
	}
}
