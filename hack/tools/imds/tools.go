//go:build tools

// Package tools pins amazon-ec2-metadata-mock, the IMDS of the testbed.
package tools

import _ "github.com/aws/amazon-ec2-metadata-mock/cmd"
