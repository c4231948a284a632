#include "support/schema.hpp"

namespace pgq_test {

std::string schema_structure(session& s) {
  return *s.scalar(R"(
    SELECT string_agg(x, E'\n' ORDER BY x) FROM (
      SELECT 'table ' || c.relname || ' ' || coalesce(array_to_string(c.reloptions, ','), '') AS x
        FROM pg_class c WHERE c.relnamespace = 'pgqueue'::regnamespace AND c.relkind = 'r'
      UNION ALL
      SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
             || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
             || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
        FROM pg_class c
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
       WHERE c.relnamespace = 'pgqueue'::regnamespace AND c.relkind IN ('r', 'v')
      UNION ALL
      SELECT 'constraint ' || n.conrelid::regclass || ' ' || n.conname || ' '
             || pg_get_constraintdef(n.oid) || CASE WHEN n.convalidated THEN '' ELSE ' (not valid)' END
        FROM pg_constraint n WHERE n.connamespace = 'pgqueue'::regnamespace
      UNION ALL
      SELECT 'index ' || pg_get_indexdef(i.indexrelid)
        FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
       WHERE c.relnamespace = 'pgqueue'::regnamespace
      UNION ALL
      SELECT 'trigger ' || pg_get_triggerdef(t.oid)
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
       WHERE c.relnamespace = 'pgqueue'::regnamespace AND NOT t.tgisinternal
      UNION ALL
      SELECT 'view ' || c.relname || ' ' || pg_get_viewdef(c.oid)
        FROM pg_class c WHERE c.relnamespace = 'pgqueue'::regnamespace AND c.relkind = 'v'
      UNION ALL
      SELECT 'function ' || p.oid::regprocedure || CASE WHEN p.prosecdef THEN ' definer' ELSE '' END
             || ' acl ' || coalesce(p.proacl::text, '-') || E'\n' || pg_get_functiondef(p.oid)
        FROM pg_proc p WHERE p.pronamespace = 'pgqueue'::regnamespace
      UNION ALL
      SELECT 'version ' || v.version FROM pgqueue.schema_version v) s)");
}

}  // namespace pgq_test
