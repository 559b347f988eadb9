package etcdstore

// ListPageSize is listPageSize, for the tests of package etcdstore_test.
const ListPageSize = listPageSize
