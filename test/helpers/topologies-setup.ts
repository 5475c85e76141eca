// vitest globalSetup of the files that share Redis topologies (see topologies.ts): runs the owner of the
// topologies in the main process, hands its endpoint to the files (`inject('redisTopologies')`) and at
// the end stops every topology, by pid, failing the run if a process outlived that. It starts them all in
// the background and does not wait: the files wait, each for the topologies it uses.
import type { TestProject } from 'vitest/node';
import { serveOwner, TopologyOwner } from './topologies.ts';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const owner = new TopologyOwner();
  const { url, token, server } = await serveOwner(owner);
  project.provide('redisTopologies', { url, token });
  owner.prestart();
  return async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    try {
      await owner.stop();
    } catch (err) {
      // vitest 4 prints an error of a global teardown and still exits 0: a redis-server left running
      // (or one that would not stop) must fail the run.
      process.exitCode = 1;
      throw err;
    }
  };
}
