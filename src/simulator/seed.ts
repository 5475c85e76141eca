// Builds the learners and groups deterministically from the seed. Learner i (1-based) belongs to
// organizations[(i - 1) % organizations.length]; about 10% have no user, about 10% are inactive.
import { formatDate, formatDateTime, formatMicroIso } from './format.ts';
import { stream, type Random } from './random.ts';
import type { LearnerGroup, RevokedAuthorization, SimLearner, SimOrg } from './types.ts';
import { LearnerTransferError } from '../core/errors.ts';

const FIRST = [
  'Ada',
  'Bruno',
  'Chloe',
  'Diego',
  'Elif',
  'Farah',
  'Goran',
  'Hana',
  'Ivan',
  'Jade',
  'Kofi',
  'Lena',
];
const LAST = ['Almeida', 'Berg', 'Chen', 'Dubois', 'Eriksen', 'Fischer', 'Garcia', 'Haddad', 'Ito', 'Jensen'];
const ROLES = ['parent', 'teacher', 'therapist', 'guardian'];
const CODE_CHARS = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';

const DAY = 86_400_000;
const BIRTH_FROM = Date.UTC(2008, 0, 1);
const BIRTH_TO = Date.UTC(2019, 11, 31);
const CREATED_FROM = Date.UTC(2022, 0, 1);
const CREATED_TO = Date.UTC(2025, 5, 30);

/**
 * Two learner groups per organization; a transfer adds the learner to the first ("the caller's
 * organization's group" of the spec) and removes it from every group it was in.
 */
export function groupsOf(org: SimOrg): LearnerGroup[] {
  return [
    { id: org.id * 100 + 1, name: `${org.name} - All learners`, description: `Every learner of ${org.name}` },
    {
      id: org.id * 100 + 2,
      name: `${org.name} - Spring cohort`,
      description: 'Learners who started in spring',
    },
  ];
}

function code(random: Random): string {
  let out = '';
  for (let i = 0; i < 8; i++) out += CODE_CHARS[random.int(0, CODE_CHARS.length - 1)];
  return out;
}

function authorizations(random: Random, after: number): RevokedAuthorization[] {
  const out: RevokedAuthorization[] = [];
  const n = random.int(0, 3);
  for (let k = 0; k < n; k++) {
    const first = random.pick(FIRST);
    const last = random.pick(LAST);
    out.push({
      userId: random.int(200_000, 899_999),
      email: `${first}.${last}${random.int(1, 99)}@example.test`.toLowerCase(),
      name: `${first} ${last}`,
      role: random.pick(ROLES),
      authorizedAt: formatMicroIso(
        after + random.int(0, 300) * DAY + random.int(0, DAY - 1),
        random.int(0, 999),
      ),
      authorizedById: random.int(1_000, 9_999),
    });
  }
  return out;
}

export function seedLearners(seed: number, count: number, orgs: readonly SimOrg[]): SimLearner[] {
  const random = stream(seed, 'learners');
  const learners: SimLearner[] = [];
  for (let id = 1; id <= count; id++) {
    const org = orgs[(id - 1) % orgs.length];
    if (!org) throw new LearnerTransferError('LT_INTERNAL', 'seedLearners: no organization');
    const [main, cohort] = groupsOf(org);
    const created = CREATED_FROM + random.int(0, Math.floor((CREATED_TO - CREATED_FROM) / 1000)) * 1000;
    const updated = created + random.int(0, 200) * DAY + random.int(0, DAY / 1000 - 1) * 1000;
    const groupRoll = random.next();
    const groups = groupRoll < 0.1 ? [] : groupRoll < 0.3 ? [main, cohort] : [main];
    learners.push({
      id,
      code: code(random),
      color: null,
      dateOfBirth: formatDate(BIRTH_FROM + random.int(0, Math.floor((BIRTH_TO - BIRTH_FROM) / DAY)) * DAY),
      firstName: random.pick(FIRST),
      lastName: random.pick(LAST),
      gender: random.int(1, 2),
      isActive: random.chance(0.1) ? 0 : 1,
      createdAt: formatDateTime(created),
      updatedAt: formatDateTime(updated),
      organizationId: org.id,
      parent: null,
      userId: random.chance(0.1) ? null : 100_000 + id,
      reportsGenerated: 0,
      v2id: null,
      groups: groups.filter((g): g is LearnerGroup => g !== undefined),
      authorizations: authorizations(random, created),
      assessmentIds: Array.from({ length: random.int(0, 4) }, () => `asm_${random.hex(12)}`),
    });
  }
  return learners;
}
