import { haSuite } from './scenarios.ts';

haSuite('cluster');
