// Workers only where there is work and budget (decision 12): a `work` process attaches a BullMQ Worker
// only to lanes due in LanesDue, at most `maxAttached`, and detaches one drained, out of budget, or
// giving way to a waiting lane (docs/many-organizations.md).
import type { Worker } from 'bullmq';
import type { Logger } from '../core/log.ts';
import type { LanesDue, LaneSwap, LaneTime } from '../queue/lanes-due.ts';
import type { LaneJobs } from '../queue/lane-state.ts';
import type { RedisClient } from '../redis/client.ts';
import { LaneChannels } from './lane-channels.ts';
import { dueAgain, newLane, type DetachReason, type Lane } from './lane.ts';

export interface AttachedWorker {
  worker: Worker;
  /** Called once the worker is closed (its permission pause, listeners). */
  dispose(): void;
}

export interface LaneDispatcherOptions {
  due: LanesDue;
  /** The lanes this process serves (its organizations, and the control lane when it serves it). */
  lanes: readonly string[];
  /** The most workers attached at once (each holds one blocking connection). */
  maxAttached: number;
  /** A worker for the lane, not running yet; `track` wraps its processor (jobs in hand). */
  createWorker(lane: string, track: <T>(run: () => Promise<T>) => Promise<T>): AttachedWorker;
  /** Reads the lane's queue once its worker is closed. */
  queueState(lane: string): Promise<LaneJobs>;
  /** Closes a worker, bounded (work-session.ts closeWorker). */
  closeWorker(worker: Worker): Promise<void>;
  /** The subscriber connection (pub/sub only): nudges and limiter events. */
  subscriber: RedisClient;
  lanesChannel: string;
  /** An organization's limiter events channel (keys.limiterEvents). */
  limiterChannel: (org: string) => string;
  logger: Logger;
  /** A stalled-job check needs a second look this long after the first (BullMQ's stalledInterval). */
  stalledIntervalMs: number;
  /** How long a process holds a lane before it must renew (a dead process's lanes come due then). */
  leaseMs?: number;
  /** A lane attached this long gives way to one that waits for a slot. */
  quantumMs?: number;
  /** With nothing due, LanesDue is read this often (a lost nudge costs at most this). */
  safetyMs?: number;
  /** A drained lane is detached after this long with nothing in hand. */
  drainGraceMs?: number;
  /** False while Redis refuses writes: nothing is attached (the write gate). */
  mayAttach?: () => boolean;
  /** Each attach and detach, for tests and metrics. */
  onChange?: (event: LaneEvent) => void;
}

export interface LaneEvent {
  kind: 'attach' | 'detach';
  lane: string;
  reason?: DetachReason;
  /** For a detach: when the lane is due again (null: nothing left). */
  dueAt?: number | null;
}

/** Lanes read from the head of LanesDue per pass; beyond it the times of this process's lanes are read. */
const HEAD = 256;
/** A wait for budget shorter than this is slept through attached (a re-attach would cost more). */
const DETACH_MIN_WAIT_MS = 1_000;
/** Jobs in flight per attached lane while other lanes wait for a slot (see #pace). */
const WAITING_CONCURRENCY = 1;
/** A release Redis refused is tried again this often (and at once when the write gate reopens). */
const RELEASE_RETRY_MS = 500;
/** A lane whose budget waits for a person (paused, every token refused) is looked at again this often. */
const INDEFINITE_RECHECK_MS = 10 * 60_000;

export class LaneDispatcher {
  readonly #o: Required<Pick<LaneDispatcherOptions, 'leaseMs' | 'quantumMs' | 'safetyMs' | 'drainGraceMs'>> &
    LaneDispatcherOptions;
  readonly #attached = new Map<string, Lane>();
  #lanes: Set<string>;
  #timer: NodeJS.Timeout | undefined;
  #renewTimer: NodeJS.Timeout | undefined;
  #passing: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  #started = false;
  #paused = false;
  /** Lanes seen due but left waiting for a slot in the last pass. */
  #waiting = 0;
  /** Lanes whose blocking connection is open (attached, or closing and not yet let go). */
  #holding(): number {
    let n = 0;
    for (const lane of this.#attached.values()) if (!lane.released) n++;
    return n;
  }

  /** Detached lanes whose release Redis refused (a write refusal, a lost connection): tried each pass. */
  readonly #unreleased = new Map<string, LaneSwap>();
  /** Lanes attached since the last call of takeTouched (the repair sweep looks only at those). */
  readonly #touched = new Set<string>();
  readonly #channels: LaneChannels;

  constructor(options: LaneDispatcherOptions) {
    this.#o = {
      leaseMs: 30_000,
      quantumMs: 250,
      safetyMs: 30_000,
      drainGraceMs: 300,
      ...options,
    };
    this.#lanes = new Set(options.lanes);
    this.#channels = new LaneChannels({
      subscriber: options.subscriber,
      lanesChannel: options.lanesChannel,
      limiterChannel: options.limiterChannel,
      onNudge: () => this.nudge(),
      onLimiterEvent: (org) => this.#limiterEvent(org),
    });
  }

  async start(): Promise<void> {
    await this.#channels.start(this.#lanes);
    this.#started = true;
    this.#renewTimer = setInterval(() => void this.#renew(), Math.max(1000, this.#o.leaseMs / 3));
    this.#renewTimer.unref();
    this.nudge();
  }

  /** Look at LanesDue soon (a nudge, a detach, the gate opened). */
  nudge(): void {
    if (this.#stopped || !this.#started) return;
    if (this.#passing) {
      this.#again = true;
      return;
    }
    this.#passing = this.#pass()
      .catch((err: Error) => {
        this.#o.logger.warn({ err: err.message }, 'lanes: could not read which queues have work');
        this.#schedule(Math.min(this.#o.safetyMs, this.#unreleased.size > 0 ? RELEASE_RETRY_MS : 2_000));
      })
      .finally(() => {
        this.#passing = undefined;
        if (this.#again) {
          this.#again = false;
          this.nudge();
        }
      });
  }

  /** The lanes this process serves changed (tokens added or removed). */
  setLanes(lanes: readonly string[]): void {
    this.#lanes = new Set(lanes);
    for (const lane of this.#attached.values()) {
      if (!this.#lanes.has(lane.name)) void this.#detach(lane, 'removed');
    }
    this.#channels
      .follow(this.#lanes)
      .catch((err: Error) => this.#o.logger.warn({ err: err.message }, 'lanes: could not subscribe'))
      .finally(() => this.nudge());
  }

  /**
   * The limiter refused a permit of this organization for `waitMs` (`indefinite`: paused, or every token
   * refused): its worker is detached and the lane waits until then, unless the wait is too short to be
   * worth a re-attach and no other lane waits for the slot.
   */
  budgetWait(org: string, waitMs: number, indefinite: boolean, askedAtMs = 0): boolean {
    const lane = this.#attached.get(org);
    if (!lane) return false;
    // Already leaving (another of its jobs was refused first): its worker fetches nothing more.
    if (lane.closing) return true;
    if (!indefinite && waitMs < DETACH_MIN_WAIT_MS && this.#waiting === 0) return false;
    // A budget event (a resume, an unblock) came after the refused acquire was sent: the refusal may be
    // stale, so the lane is let go due at once instead of for the wait.
    const stale = lane.lastEventAt >= askedAtMs;
    lane.budgetUntil = stale
      ? undefined
      : Date.now() + (indefinite ? Math.max(waitMs, INDEFINITE_RECHECK_MS) : waitMs);
    void this.#detach(lane, 'budget');
    return true;
  }

  /** While Redis refuses writes: the attached workers stop fetching and nothing new is attached. */
  pause(): void {
    this.#paused = true;
    for (const lane of this.#attached.values()) void lane.worker.pause(true).catch(() => {});
  }

  resume(): void {
    this.#paused = false;
    for (const lane of this.#attached.values()) {
      if (lane.closing) continue;
      void lane.worker.resume().catch(() => {});
      this.#maybeDrained(lane);
    }
    this.nudge();
  }

  /** The workers attached now. */
  get workers(): Worker[] {
    return [...this.#attached.values()].map((l) => l.worker);
  }

  get attachedLanes(): string[] {
    return [...this.#attached.keys()];
  }

  /** The lanes attached since the last call (then forgotten). */
  takeTouched(): string[] {
    const out = [...this.#touched, ...this.#attached.keys()];
    this.#touched.clear();
    return [...new Set(out)];
  }

  /** Detaches every lane (their jobs in hand finish and record); nothing is attached after. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#renewTimer) clearInterval(this.#renewTimer);
    this.#channels.stop();
    await this.#passing?.catch(() => {});
    await Promise.all([...this.#attached.values()].map((lane) => this.#detach(lane, 'stop')));
    await this.#releaseAgain();
    if (this.#unreleased.size > 0) {
      this.#o.logger.warn(
        { lanes: [...this.#unreleased.keys()] },
        'lanes: left under the lease of this process (Redis refused their release): due when the lease ends',
      );
    }
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.nudge(), Math.max(0, Math.min(ms, this.#o.safetyMs)));
    this.#timer.unref();
  }

  /** The times of this process's lanes: the head of LanesDue, or a read of them. */
  async #times(): Promise<LaneTime[]> {
    const head = await this.#o.due.head(HEAD);
    const mine = head.filter((t) => this.#lanes.has(t.lane));
    if (head.length < HEAD || mine.length > 0) return mine;
    const all = await this.#o.due.timesOf([...this.#lanes]);
    return all.filter((t): t is LaneTime => t !== undefined).sort((a, b) => a.at - b.at);
  }

  async #pass(): Promise<void> {
    if (this.#stopped) return;
    await this.#releaseAgain();
    const now = Date.now();
    const times = await this.#times();
    const due = times.filter((t) => t.at <= now);
    // Lanes due that this process holds already (a producer marked them): take them back under its lease.
    const held = due.filter((t) => this.#attached.get(t.lane) && !this.#attached.get(t.lane)?.closing);
    const free = due.filter((t) => !this.#attached.has(t.lane));
    const gateOpen = !this.#paused && (this.#o.mayAttach?.() ?? true);
    const slots = gateOpen ? Math.max(0, this.#o.maxAttached - this.#holding()) : 0;
    const toAttach = free.slice(0, slots);
    const lease = Math.ceil(now + this.#o.leaseMs);
    const swaps = [...held, ...toAttach].map((t) => ({ lane: t.lane, seen: t.raw, next: lease }));
    const taken = swaps.length > 0 ? await this.#o.due.swap(swaps) : [];
    swaps.forEach((s, i) => {
      if (!taken[i] || this.#stopped) return;
      const lane = this.#attached.get(s.lane);
      if (lane) lane.lease = String(lease);
      else this.#attach(s.lane, String(lease));
    });
    this.#waiting = gateOpen ? Math.max(0, free.length - toAttach.length) : 0;
    this.#pace();
    let nextMs = this.#o.safetyMs;
    if (this.#waiting > 0) nextMs = Math.min(nextMs, this.#rotate(this.#waiting));
    // The next lane to come due that this process does not hold (held ones are renewed on their own).
    const next = times.find((t) => t.at > now && !this.#attached.has(t.lane));
    if (next) nextMs = Math.min(nextMs, next.at - now);
    if (toAttach.length < swaps.length - held.length || taken.some((t) => !t)) nextMs = Math.min(nextMs, 50);
    if (this.#unreleased.size > 0) nextMs = Math.min(nextMs, RELEASE_RETRY_MS);
    this.#schedule(nextMs);
  }

  /**
   * The releases Redis refused, tried again: until one lands, its lane sits under this process's lease with
   * no worker (fault seed 18: Redis full for 3 s stalled a lane for its whole lease). A swap that finds
   * another time (the lease ran out and a process took the lane) drops it: the lane is that process's now.
   */
  async #releaseAgain(): Promise<void> {
    if (this.#unreleased.size === 0) return;
    const pending = [...this.#unreleased.values()];
    try {
      const done = await this.#o.due.swap(pending);
      // Only what was tried: the same lane taken and refused again meanwhile stays for the next pass.
      for (const p of pending) if (this.#unreleased.get(p.lane) === p) this.#unreleased.delete(p.lane);
      const lanes = pending.filter((_, i) => done[i]).map((p) => p.lane);
      if (lanes.length > 0) this.#o.logger.info({ lanes }, 'lanes: released after Redis refused it');
    } catch (err) {
      this.#o.logger.debug({ err: (err as Error).message }, 'lanes: a release is still refused');
    }
  }

  /**
   * While lanes wait for a slot, each attached lane takes one job at a time: the machine's time goes to
   * every lane's first transfers before anyone's tenth (with ten in flight per lane, a lane attached last
   * waits behind hundreds of calls). With no lane waiting, each takes its full concurrency again.
   */
  #pace(): void {
    const waiting = this.#waiting > 0;
    for (const lane of this.#attached.values()) {
      if (lane.closing) continue;
      const want = waiting ? Math.min(WAITING_CONCURRENCY, lane.concurrency) : lane.concurrency;
      if (lane.worker.concurrency !== want) lane.worker.concurrency = want;
    }
  }

  /**
   * Lanes wait for a slot: the lanes attached longest (past the quantum) give way, as many as wait.
   * Returns when the next one's quantum ends.
   */
  #rotate(waiting: number): number {
    const now = Date.now();
    const open = [...this.#attached.values()].filter((l) => !l.closing).sort((a, b) => a.since - b.since);
    let n = 0;
    for (const lane of open) {
      if (n >= waiting) break;
      if (now - lane.since < this.#o.quantumMs) return lane.since + this.#o.quantumMs - now;
      this.#detach(lane, 'rotate');
      n++;
    }
    return this.#o.quantumMs;
  }

  #attach(name: string, lease: string): void {
    const slot: { lane?: Lane } = {};
    const track = async <T>(run: () => Promise<T>): Promise<T> => {
      const l = slot.lane;
      if (l) l.inFlight++;
      try {
        return await run();
      } finally {
        if (l) {
          l.inFlight--;
          this.#maybeDrained(l);
        }
      }
    };
    const { worker, dispose } = this.#o.createWorker(name, track);
    const lane = newLane(name, worker, dispose, lease);
    slot.lane = lane;
    // BullMQ says 'drained' once when a fetch finds nothing; with jobs finishing and fetching in parallel
    // its events can come in any order, so the queue itself is read before the lane is let go.
    worker.on('drained', () => this.#maybeDrained(lane));
    this.#attached.set(name, lane);
    this.#touched.add(name);
    this.#o.onChange?.({ kind: 'attach', lane: name });
    worker
      .run()
      .catch((err: Error) =>
        this.#o.logger.error({ lane: name, err: err.message }, 'worker stopped on an error'),
      );
    if (this.#paused) void worker.pause(true).catch(() => {});
  }

  /**
   * Nothing in hand: after a grace, a lane whose queue has nothing to take now is detached (what is delayed
   * or active elsewhere is waited for under its time in LanesDue, see #dueAgain).
   */
  #maybeDrained(lane: Lane): void {
    if (lane.inFlight > 0 || lane.closing || lane.drainTimer || this.#paused) return;
    // With lanes waiting for a slot, no grace: the slot is theirs as soon as this queue is empty.
    lane.drainTimer = setTimeout(
      () => {
        lane.drainTimer = undefined;
        if (lane.inFlight > 0 || lane.closing || this.#paused) return;
        this.#o
          .queueState(lane.name)
          .then((q) => {
            if (q.ready === 0 && lane.inFlight === 0 && !lane.closing) void this.#detach(lane, 'drained');
          })
          .catch((err: Error) =>
            this.#o.logger.warn({ lane: lane.name, err: err.message }, 'lanes: could not read a queue'),
          );
      },
      this.#waiting > 0 ? 0 : this.#o.drainGraceMs,
    );
    lane.drainTimer.unref();
  }

  #detach(lane: Lane, reason: DetachReason): Promise<void> {
    lane.closing ??= this.#close(lane, reason);
    return lane.closing;
  }

  async #close(lane: Lane, reason: DetachReason): Promise<void> {
    if (lane.drainTimer) clearTimeout(lane.drainTimer);
    // close() stops the fetching at once, then waits for the jobs in hand. Those need only the shared
    // connection: the blocking one is let go now, and its slot goes to a lane that waits.
    const closed = this.#o.closeWorker(lane.worker);
    await lane.worker.backend.disconnectBlocking(true).catch(() => {});
    lane.released = true;
    if (!this.#stopped) this.nudge();
    try {
      await closed;
    } finally {
      lane.dispose();
    }
    let dueAt: number | null = Date.now();
    const decidedAt = Date.now();
    let released = false;
    try {
      dueAt = dueAgain(lane, reason, await this.#o.queueState(lane.name), this.#o.stalledIntervalMs);
      await this.#o.due.swap([{ lane: lane.name, seen: lane.lease, next: dueAt }]);
      released = true;
      // An event heard after the time above was decided (it could not change it): wake the lane now.
      if (lane.lastEventAt >= decidedAt && dueAt !== null) await this.#o.due.wake([lane.name]);
    } catch (err) {
      // Refused (Redis refusing writes, a lost connection): the release, or the wake after it, is tried
      // again on each pass (#releaseAgain), due at once if an event came meanwhile. At worst the lane comes
      // due when its lease ends, and whoever takes it then looks again.
      const wakeNow = dueAt !== null && lane.lastEventAt >= decidedAt;
      const seen = released && dueAt !== null ? String(Math.ceil(dueAt)) : lane.lease;
      this.#unreleased.set(lane.name, { lane: lane.name, seen, next: wakeNow ? Date.now() : dueAt });
      this.#o.logger.warn(
        { lane: lane.name, err: (err as Error).message },
        released
          ? 'lanes: could not wake a lane (tried again)'
          : 'lanes: could not release a lane (tried again)',
      );
    } finally {
      this.#attached.delete(lane.name);
      this.#o.onChange?.({ kind: 'detach', lane: lane.name, reason, dueAt });
      if (!this.#stopped) this.nudge();
    }
  }

  /** Renews the leases of the lanes held here (one a producer marked is taken again). */
  async #renew(): Promise<void> {
    const held = [...this.#attached.values()].filter((l) => !l.closing);
    if (held.length === 0 || this.#stopped) return;
    const lease = Math.ceil(Date.now() + this.#o.leaseMs);
    try {
      const ok = await this.#o.due.swap(held.map((l) => ({ lane: l.name, seen: l.lease, next: lease })));
      held.forEach((l, i) => {
        if (ok[i]) l.lease = String(lease);
        // A safety net for an event missed: a lane with nothing in hand is looked at again.
        this.#maybeDrained(l);
      });
      if (ok.some((x) => !x)) this.nudge();
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message }, 'lanes: could not renew the leases');
    }
  }

  /** An organization's limiter event: a lane that waits is due now. */
  #limiterEvent(org: string): void {
    if (!this.#lanes.has(org)) return;
    const held = this.#attached.get(org);
    if (held) {
      // Being detached for want of budget, or about to be (its refusal is on its way to budgetWait): the
      // budget came back meanwhile, so it is due again at once (#close wakes it if this comes too late).
      held.lastEventAt = Date.now();
      held.budgetUntil = undefined;
      return;
    }
    // Let go, its release refused and waiting to be tried again: due at once when it lands.
    const pending = this.#unreleased.get(org);
    if (pending && pending.next !== null) pending.next = Date.now();
    this.wake([org]);
  }

  /** Lanes that wait (for budget, a resume, a token) are due now, and this process looks at once. */
  wake(lanes: readonly string[]): void {
    this.#o.due
      .wake(lanes)
      .then(() => this.nudge())
      .catch((err: Error) => this.#o.logger.warn({ lanes, err: err.message }, 'lanes: could not wake lanes'));
  }
}
