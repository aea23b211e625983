-- redrive schema 42 (PostgreSQL): the tenant_isolation policy reads the transaction's tenant in
-- one sub-select, not two. The rule is 0038's (a tenant's rows, or every row under '*'; no
-- setting matches nothing: a NULL matches neither branch); the CASE names the setting once as
-- its operand, so each use of a table under the policy plans one InitPlan, not two. Every
-- statement paid the second's set-up (a Result node, its projection and tuple slot) and, for a
-- row written, its run (the WITH CHECK); a one-job enqueue writes jobs and events: ~15,000 of
-- its ~578,000 backend instructions (callgrind, single-user backend, 200 executions). The
-- per-row test is the same two comparisons, and the planner's estimate (a CASE: one half, see
-- 0007) is unchanged. A LATER migration that adds a tenant table should create its policy in
-- this form.
DO $$
DECLARE
    tenant_table record;
    rule constant text :=
        'CASE (SELECT current_setting(''redrive.tenant_id'', true)) '
        'WHEN ''*'' THEN true WHEN tenant_id THEN true ELSE false END';
BEGIN
    FOR tenant_table IN
        SELECT tablename FROM pg_policies
        WHERE schemaname = current_schema() AND policyname = 'tenant_isolation'
        ORDER BY tablename
    LOOP
        EXECUTE format(
            'ALTER POLICY tenant_isolation ON %1$I USING (%2$s) WITH CHECK (%2$s)',
            tenant_table.tablename, rule
        );
    END LOOP;
END
$$;
