// The shapes of the Redis topologies the tests start (redis-ha.ts): their options, their handles, and the
// access (password, TLS) the harness's own connections need.
export interface HaNode {
  port: number;
  /** With `plainToo`: the node's plain-text port beside its TLS `port`. */
  plainPort?: number | undefined;
  pid: number;
}

export interface FailoverResult {
  /** The port now serving what the dead master served. */
  newMasterPort: number;
  /** From the kill (killNode/killMaster) to the moment the new master was seen serving. */
  ms: number;
  /** When the SIGKILL was sent (Date.now() of this machine), to line up with what clients saw. */
  killedAt: number;
}

/** Files of a throwaway CA and the server certificate it signed (CN localhost, SAN localhost + 127.0.0.1). */
export interface TlsFiles {
  dir: string;
  /** The CA certificate (PEM): what REDIS_TLS_CA points at. */
  caFile: string;
  certFile: string;
  keyFile: string;
  /** The CA certificate's contents. */
  ca: Buffer;
}

/** Credentials and TLS for the nodes of a topology. Without them, nodes listen in plain text, no password. */
export interface RedisAccessOptions {
  /** requirepass + masterauth on every data node (sentinels get `sentinel auth-pass`). */
  password?: string;
  /**
   * TLS only (`--port 0 --tls-port P`, replication and cluster bus over TLS too; clients need no certificate),
   * with a throwaway CA made by openssl: `true` makes it in the handle's directory, `{ dir }` in `dir`, where
   * the files of an earlier call are reused (one CA, one REDIS_TLS_CA, for several topologies).
   */
  tls?: true | { dir: string };
  /**
   * With `tls`: every data node also listens in plain text on a port of its own (`port` and `tls-port` at
   * once), so that one topology serves the TLS tests and the plain ones. A Cluster node then answers a
   * plain-text client with the plain ports of its peers (CLUSTER SLOTS, MOVED), a TLS client with the TLS
   * ones. Sentinel cannot do this: it names one port per master, so a Sentinel setup is TLS or plain.
   */
  plainToo?: boolean;
}

/** What the harness's own control connections (and redis-cli) need to reach a node. */
export interface NodeAccess {
  password?: string | undefined;
  tls?: TlsFiles | undefined;
  plainToo?: boolean | undefined;
}

export interface RedisClusterOptions extends RedisAccessOptions {
  /** Masters (>= 3, redis-cli's minimum). Default 3. */
  masters?: number;
  /** Replicas per master. Default 1. */
  replicasPerMaster?: number;
  /** cluster-node-timeout: how long a node may be silent before it is considered failing. Default 1500. */
  nodeTimeoutMs?: number;
}

export interface RedisClusterHandle {
  /** Every node as "127.0.0.1:p1,127.0.0.1:p2,..." (the REDIS_CLUSTER_NODES format). */
  seeds: string;
  /** With `plainToo`: the same nodes' plain-text ports, in the same format. */
  plainSeeds?: string | undefined;
  /** Every node, with the pid of its current process (a restarted node has a new one). */
  readonly nodes: HaNode[];
  /** cluster-node-timeout, as configured. */
  nodeTimeoutMs: number;
  /** The longest a failover may take with this configuration (see clusterFailoverBoundMs). */
  failoverBoundMs: number;
  /** The handle's temporary directory (node configs and logs). */
  dir: string;
  /** How long startCluster took, in ms. */
  setupMs: number;
  /** The data nodes' password, when started with one. */
  password?: string | undefined;
  /** The CA and certificate, when started with TLS (nodes then listen on TLS only). */
  tls?: TlsFiles | undefined;
  /** Ports of the live masters that serve slots, ascending. */
  masters(): Promise<number[]>;
  /** Port of the live master serving the key's slot. */
  masterOf(key: string): Promise<number>;
  /** SIGKILLs the node on that port and waits for the process to be gone. */
  killNode(port: number): Promise<void>;
  /**
   * After killNode(deadPort) on a master: waits until every live node reports cluster_state:ok and agrees
   * that one live master serves all the dead master's slots.
   */
  waitForFailover(deadPort: number, timeoutMs?: number): Promise<FailoverResult>;
  /** Waits until every live replica has acknowledged everything its master has written. */
  waitForReplication(timeoutMs?: number): Promise<void>;
  /**
   * Starts every killed node again (same port, same nodes.conf: it rejoins as a replica of whoever took
   * its slots) and waits until the cluster is as it started: cluster_state:ok on every node, all 16384
   * slots served, every master with its replicas in sync. What a shared cluster needs after a failover.
   */
  heal(timeoutMs?: number): Promise<void>;
  /** SCAN over every live master. */
  allKeys(pattern?: string): Promise<string[]>;
  /** Tail of a node's log, for failure messages. */
  logTail(port: number): string;
  stop(): Promise<void>;
}

export interface RedisSentinelOptions extends RedisAccessOptions {
  /** requirepass on the sentinels themselves (REDIS_SENTINEL_PASSWORD); they use it among themselves too. */
  sentinelPassword?: string;
  /** Default 'ltmaster'. */
  masterName?: string;
  /** Replicas of the master. Default 1. */
  replicas?: number;
  /** Sentinels (quorum is a majority). Default 3. */
  sentinels?: number;
  /** sentinel down-after-milliseconds. Default 1000. */
  downAfterMs?: number;
  /** sentinel failover-timeout. Default 3000. */
  failoverTimeoutMs?: number;
}

export interface RedisSentinelHandle {
  /** Every sentinel as "127.0.0.1:s1,127.0.0.1:s2,..." (the REDIS_SENTINELS format). */
  sentinels: string;
  sentinelPorts: number[];
  masterName: string;
  /** Every process: data nodes and sentinels, with the pid of its current process. */
  readonly nodes: HaNode[];
  /** sentinel down-after-milliseconds and failover-timeout, as configured. */
  downAfterMs: number;
  failoverTimeoutMs: number;
  /** The longest a failover may take with this configuration (see sentinelFailoverBoundMs). */
  failoverBoundMs: number;
  dir: string;
  setupMs: number;
  /** The data nodes' password, when started with one. */
  password?: string | undefined;
  /** The sentinels' own password, when started with one. */
  sentinelPassword?: string | undefined;
  /** The CA and certificate, when started with TLS (data nodes and sentinels then listen on TLS only). */
  tls?: TlsFiles | undefined;
  /** The master's port as the sentinels report it (SENTINEL GET-MASTER-ADDR-BY-NAME). */
  masterPort(): Promise<number>;
  /** Ports of the replicas the sentinels know and do not consider down. */
  replicaPorts(): Promise<number[]>;
  /** SIGKILLs the current master; returns its port. */
  killMaster(): Promise<number>;
  /**
   * After killMaster(): waits until every live sentinel names a new master and that node answers as a
   * master.
   */
  waitForFailover(oldPort: number, timeoutMs?: number): Promise<FailoverResult>;
  /** Waits until every live replica has acknowledged everything the master has written. */
  waitForReplication(timeoutMs?: number): Promise<void>;
  /**
   * Starts every killed data node again as a replica of the current master and waits until the setup is
   * as it started: every sentinel names one live master, which has all its replicas in sync.
   */
  heal(timeoutMs?: number): Promise<void>;
  /** SCAN on the current master. */
  allKeys(pattern?: string): Promise<string[]>;
  logTail(port: number): string;
  stop(): Promise<void>;
}

export interface RedisStandaloneHandle {
  port: number;
  /** The REDIS_URL for it: rediss:// with TLS, the password in it when there is one. */
  url: string;
  /** With `plainToo`: its plain-text port, and the redis:// URL of it (with the password). */
  plainPort?: number | undefined;
  plainUrl?: string | undefined;
  nodes: HaNode[];
  dir: string;
  setupMs: number;
  password?: string | undefined;
  tls?: TlsFiles | undefined;
  logTail(): string;
  stop(): Promise<void>;
}
