import { haSuite } from './scenarios.ts';

haSuite('sentinel');
