// Package etcdlease holds the etcd lease code that election/etcd and
// versiongate/etcdstore share: a keep-alive that sends exactly one
// request.
//
// clientv3's Lease.KeepAliveOnce is not used by either: it opens a new
// stream and sends again at once, with no pause, for as long as the
// answer is Unavailable or Internal and its context lives. Behind a
// server or proxy that answers Unavailable at once, one renewal of an
// election term opened some 20,000 streams before the term's validity ran
// out, and a record's keep-alive over 200,000 in the 60 s of fake time (a
// few real seconds) that versiongate/etcdstore's budget test counts.
// KeepAliveOnce here sends one request and returns the answer; the
// caller's own loop, which backs off, decides when to try again
// (TestKeepAliveOnceSendsOneRequestPerCall).
package etcdlease
