package kube

import "k8s.io/client-go/rest"

// CoreREST is the REST client of the core group (/api/v1), for requests
// the Client interface does not name: the node proxy
// (kubeletshutdown.ProxyFetch).
func (r *REST) CoreREST() rest.Interface { return r.core }
