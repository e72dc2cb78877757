package nodes

import "testing"

func TestInstanceID(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"eks", "aws:///us-east-1a/i-0123456789abcdef0", "i-0123456789abcdef0"},
		{"short id", "aws:///eu-west-1b/i-1234abcd", "i-1234abcd"},
		{"not aws", "gce://project/zone/i-0123456789abcdef0", ""},
		{"empty", "", ""},
		{"kwok default", "kwok://node-1", ""},
		{"garbage id", "aws:///us-east-1a/i-XYZ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := InstanceID(tt.in); got != tt.want {
				t.Errorf("InstanceID(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
