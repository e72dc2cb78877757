package awssim

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const (
	apiVersion = "2011-01-01"
	xmlns      = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
	// maxBody bounds a request body; AWS's query API limit is far below.
	maxBody = 1 << 20
	// xmlTime is how timestamps appear in responses.
	xmlTime = "2006-01-02T15:04:05.000Z"
)

// apiError is an error answered to the client in AWS's XML error shape.
type apiError struct {
	status  int
	typ     string // Sender or Receiver
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func validationError(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "Sender", code: "ValidationError", message: fmt.Sprintf(format, args...)}
}

func senderError(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "Sender", code: code, message: fmt.Sprintf(format, args...)}
}

type handlerFunc func(ctx context.Context, f form) (any, error)

// ServeHTTP answers one Auto Scaling query-protocol request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestID := newUUID()
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		writeError(w, requestID, senderError("MalformedQueryString", "cannot parse the request: %v", err))
		return
	}
	f := form{values: r.Form}
	action := f.str("Action")
	s.countCall(action)
	if action == "" {
		writeError(w, requestID, senderError("MissingAction", "Request is missing Action"))
		return
	}
	if f.str("Version") == elbAPIVersion {
		s.serveELB(w, requestID, action, f)
		return
	}
	if v := f.str("Version"); v != apiVersion {
		writeError(w, requestID, senderError("InvalidParameterValue", "Version %q is not supported; use %s", v, apiVersion))
		return
	}
	h, ok := s.handlers[action]
	if !ok {
		writeError(w, requestID, senderError("InvalidAction", "The action %s is not valid for this web service.", action))
		return
	}
	result, err := s.run(h, f)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			s.log.Error("awssim request failed", "action", action, "err", err)
			ae = &apiError{status: http.StatusInternalServerError, typ: "Receiver", code: "InternalFailure", message: err.Error()}
		}
		writeError(w, requestID, ae)
		return
	}
	writeResult(w, requestID, action, result)
}

// run performs one operation under the model lock, after bringing the
// model up to date with the clock.
func (s *Server) run(h handlerFunc, f form) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, opTimeout)
	defer cancel()
	if err := s.expire(ctx); err != nil {
		return nil, err
	}
	return h(ctx, f)
}

func writeResult(w http.ResponseWriter, requestID, action string, result any) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	fmt.Fprintf(&buf, `<%sResponse xmlns="%s">`, action, xmlns)
	enc := xml.NewEncoder(&buf)
	if result == nil {
		result = struct{}{}
	}
	if err := enc.EncodeElement(result, xml.StartElement{Name: xml.Name{Local: action + "Result"}}); err != nil {
		writeError(w, requestID, &apiError{status: http.StatusInternalServerError, typ: "Receiver", code: "InternalFailure", message: err.Error()})
		return
	}
	fmt.Fprintf(&buf, `<ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>`, requestID, action)
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", requestID)
	_, _ = w.Write(buf.Bytes())
}

type xmlErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

func writeError(w http.ResponseWriter, requestID string, e *apiError) {
	b, err := xml.Marshal(xmlErrorResponse{Xmlns: xmlns, Type: e.typ, Code: e.code, Message: e.message, RequestID: requestID})
	if err != nil { // cannot happen: only strings
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", requestID)
	w.WriteHeader(e.status)
	_, _ = w.Write(append([]byte(xml.Header), b...))
}

// form reads query-protocol parameters.
type form struct{ values url.Values }

func (f form) has(key string) bool { return f.values.Has(key) }

func (f form) str(key string) string { return f.values.Get(key) }

// required returns a parameter that must be present and non-empty.
func (f form) required(key string) (string, error) {
	v := f.values.Get(key)
	if v == "" {
		return "", validationError("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", lowerFirst(key))
	}
	return v, nil
}

// int32 returns an optional integer parameter.
func (f form) int32(key string) (*int32, error) {
	if !f.has(key) {
		return nil, nil
	}
	n, err := strconv.ParseInt(f.str(key), 10, 32)
	if err != nil {
		return nil, validationError("Value '%s' at '%s' is not a valid integer", f.str(key), lowerFirst(key))
	}
	v := int32(n)
	return &v, nil
}

// bool returns an optional boolean parameter.
func (f form) bool(key string) (*bool, error) {
	if !f.has(key) {
		return nil, nil
	}
	switch f.str(key) {
	case "true":
		v := true
		return &v, nil
	case "false":
		v := false
		return &v, nil
	}
	return nil, validationError("Value '%s' at '%s' is not a valid boolean", f.str(key), lowerFirst(key))
}

// list returns the members KEY.member.1, KEY.member.2, … in order.
func (f form) list(key string) []string {
	var out []string
	for i := 1; ; i++ {
		k := fmt.Sprintf("%s.member.%d", key, i)
		if !f.has(k) {
			return out
		}
		out = append(out, f.str(k))
	}
}

// members returns the prefixes KEY.member.1, … of a list of structures.
func (f form) members(key string) []string {
	var out []string
	for i := 1; ; i++ {
		p := fmt.Sprintf("%s.member.%d.", key, i)
		found := false
		for k := range f.values {
			if strings.HasPrefix(k, p) {
				found = true
				break
			}
		}
		if !found {
			return out
		}
		out = append(out, p)
	}
}

// hasPrefix reports whether any parameter starts with prefix.
func (f form) hasPrefix(prefix string) bool {
	for k := range f.values {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func fmtTime(t time.Time) string { return t.UTC().Format(xmlTime) }

// page applies MaxRecords/NextToken pagination to n items: it returns the
// half-open range to answer and the next token ("" at the end).
func page(f form, n, defaultMax, limit int) (from, to int, next string, err error) {
	maxRecords := defaultMax
	if m, err := f.int32("MaxRecords"); err != nil {
		return 0, 0, "", err
	} else if m != nil {
		if *m < 1 || int(*m) > limit {
			return 0, 0, "", validationError("1 validation error detected: Value '%d' at 'maxRecords' failed to satisfy constraint: Member must have value between 1 and %d", *m, limit)
		}
		maxRecords = int(*m)
	}
	if tok := f.str("NextToken"); tok != "" {
		from, err = strconv.Atoi(strings.TrimPrefix(tok, "awssim-"))
		if err != nil || from < 0 || !strings.HasPrefix(tok, "awssim-") {
			return 0, 0, "", senderError("InvalidNextToken", "The token '%s' is invalid.", tok)
		}
	}
	from = min(from, n)
	to = min(from+maxRecords, n)
	if to < n {
		next = "awssim-" + strconv.Itoa(to)
	}
	return from, to, next, nil
}
