// Real, local, highly available Redis topologies for tests, started from the redis-server binary:
// - startCluster(): a Redis Cluster (3 masters + 3 replicas by default), redis-cluster.ts;
// - startSentinel(): 1 master, 1 replica and 3 sentinels (`redis-server <file> --sentinel`), redis-sentinel.ts;
// - startStandalone(): one server with a password and TLS, redis-standalone.ts.
// Every node gets a random free port (cluster ports <= 55535: a node's bus listens on port + 10000) and a
// private temporary directory. stop() kills every process the handle started, by pid, and removes the
// directory; a process 'exit' hook SIGKILLs whatever a crashed test left behind (redis-ha-procs.ts).
// Nothing here ever talks to the shared Redis at 6379. Anything that does not come up in time throws with
// the nodes' log tails.
export { clusterFailoverBoundMs, makeTlsFiles, sentinelFailoverBoundMs } from './redis-ha-access.ts';
export { startCluster } from './redis-cluster.ts';
export { startSentinel } from './redis-sentinel.ts';
export { startStandalone } from './redis-standalone.ts';
export type * from './redis-ha-types.ts';
